"""openqa's Python API: search the textbooks, solve questions, build indexes, evaluate and tune, in
a few lines, with the same results as the commands (which are written over these functions).

>>> from openqa import Solver
>>> solver = Solver.open("ir-custom", lang="en", data_dir="medqa/data_clean")
>>> solver.answer("Which drug irreversibly inhibits cyclooxygenase?", {"A": "Ceftriaxone", "B": "Aspirin"}).prediction
'B'

- ``Searcher``: a search engine over one index (opened from a language and engine, a corpus name,
  or an index folder); ``search(query, k)`` gives ranked ``SearchHit``s (paragraph id, book,
  score, text), ``search([...], k)`` one list per query, ``batch_search`` the same as arrays.
- ``Solver``: a method with its dev-tuned settings (or yours); ``answer(question, options)`` gives
  an ``Answer`` whose ``to_dict()`` is exactly what ``openqa answer --json`` prints (the record of
  ``openqa.pipeline.answer_record``, the function the HTTP server answers with too; fields that
  later versions add to it appear here unchanged).
- ``build_index``, ``run_eval``, ``tune``: the records ``openqa index``, ``eval`` and ``tune``
  write, typed (``to_dict()`` gives the record); ``corpus_fingerprint``: the books and checksums
  of a corpus, as those records carry them.

Where things are (data, indexes, your tuned settings) is a ``Workspace``; every function also
takes its fields as keywords, each falling back to its environment variable (``OPENQA_DATA``,
``OPENQA_INDEXES``...) as the commands do. Errors are ``openqa.errors.OpenQAError`` and its
subclasses (a missing optional package: ``MissingExtraError``, naming the extra); nothing is
printed, and no progress bar is shown unless ``progress=True``.
"""

from __future__ import annotations

from openqa.api.checks import DEFAULT_K, MAX_K
from openqa.api.models import train_reader
from openqa.api.parts import CrossValidation, HeldOut, ScoredQuestions, exam_bank, score_parts
from openqa.api.runs import Evaluation, Tuning, browse_results, evaluate_request, result_curves, run_eval, tune, tune_in
from openqa.api.search import BatchHits, Searcher, SearchHit, check_queries, open_folder, search_hits
from openqa.api.solve import Answer, Solver
from openqa.api.workspace import Built, Workspace, build_index, corpus_fingerprint, corpus_paragraphs

__all__ = ["DEFAULT_K", "MAX_K", "Answer", "BatchHits", "Built", "CrossValidation", "Evaluation", "HeldOut", "ScoredQuestions",
           "SearchHit", "Searcher", "Solver", "Tuning", "Workspace", "browse_results", "build_index", "check_queries",
           "corpus_fingerprint", "corpus_paragraphs", "evaluate_request", "exam_bank", "open_folder", "result_curves", "run_eval",
           "score_parts", "search_hits", "train_reader", "tune", "tune_in"]
