"""openqa: open-domain question answering for medical licensing exams (MedQA).

The Python API (``openqa.api``) is importable from here: ``Searcher``, ``Solver``, ``Workspace``,
``build_index``, ``run_eval``, ``tune`` and the error base ``OpenQAError``; with them the questions
of a dataset split or a file (``load_questions``, ``read_question_file``, ``write_questions``,
``Question``, ``dataset_spec``), the corpus (``corpus_paragraphs``, ``language``) and the queries IR
methods ask (``option_queries``); many questions scored at once and an ensemble's parts judged on
them (``ScoredQuestions``, ``score_parts``, ``CrossValidation``), the question bank
(``QuestionBank``, ``BankScorer``, ``exam_bank``), the LLM reader's settings (``LLMSettings``), and
how result records are kept (``run_record``: the provenance a record carries; ``record_folder``:
where a results tree keeps a record of a given name; ``read_result_set``: a summary checked against
the files written with it). For scripts that time or check them, the
models' parts (an in-process LLM and its reader, a reader and its training or cross-fitting, llama.cpp's server) and
the dense engine's (``make_encoder``, ``resolve_model``, ``TorchExactSearch``). They are loaded on
first use, so ``import openqa`` itself imports nothing heavy. The repository's scripts use these
names only (``tests/test_scripts_api.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openqa.limits import single_blas_thread_under_memory_limit

__version__ = "0.1.0"

single_blas_thread_under_memory_limit()  # before any module of the package imports numpy

#: What ``from openqa import ...`` offers, and the module each comes from.
_EXPORTS = {
    **dict.fromkeys(("Answer", "BatchHits", "Built", "Evaluation", "SearchHit", "Searcher", "Solver", "Tuning",
                     "Workspace", "browse_results", "build_index", "corpus_fingerprint", "result_curves", "run_eval", "tune"),
                   "openqa.api"),
    **dict.fromkeys(("OpenQAError", "MissingExtraError", "DataError", "UsageError"), "openqa.errors"),
    **dict.fromkeys(("Question", "load_questions", "read_question_file", "dataset_spec"), "openqa.data"),
    "write_questions": "openqa.data.formats",
    "corpus_paragraphs": "openqa.api.workspace",
    **dict.fromkeys(("language", "known_languages"), "openqa.languages"),
    **dict.fromkeys(("option_queries", "question_query"), "openqa.scorers.ir"),
    **dict.fromkeys(("ScoredQuestions", "HeldOut", "CrossValidation", "score_parts", "exam_bank"), "openqa.api.parts"),
    **dict.fromkeys(("QuestionBank", "BankScorer"), "openqa.scorers.bank"),
    "LLMSettings": "openqa.llm.settings",
    "serve_gguf": "openqa.llm.llamacpp",
    "TransformersBackend": "openqa.llm.transformers_backend",
    "LLMScorer": "openqa.llm.scorer",
    "ReplyCache": "openqa.llm.cache",
    "MultipleChoiceReader": "openqa.readers.bert",
    "TrainConfig": "openqa.readers.train",
    **dict.fromkeys(("train_reader", "cross_fit_reader"), "openqa.api.models"),
    "Estimate": "openqa.methods.base",
    **dict.fromkeys(("record_folder", "run_record", "read_result_set"), "openqa.evaluate.results"),
    **dict.fromkeys(("make_encoder", "resolve_model"), "openqa.retrieval.encoders"),
    "TorchExactSearch": "openqa.retrieval.vector_search",
}

if TYPE_CHECKING:  # what type checkers see (``name as name``: an explicit re-export under mypy --strict)
    from openqa.api import Answer as Answer
    from openqa.api import BatchHits as BatchHits
    from openqa.api import Built as Built
    from openqa.api import Evaluation as Evaluation
    from openqa.api import Searcher as Searcher
    from openqa.api import SearchHit as SearchHit
    from openqa.api import Solver as Solver
    from openqa.api import Tuning as Tuning
    from openqa.api import Workspace as Workspace
    from openqa.api import browse_results as browse_results
    from openqa.api import build_index as build_index
    from openqa.api import corpus_fingerprint as corpus_fingerprint
    from openqa.api import result_curves as result_curves
    from openqa.api import run_eval as run_eval
    from openqa.api import tune as tune
    from openqa.api.models import cross_fit_reader as cross_fit_reader
    from openqa.api.models import train_reader as train_reader
    from openqa.api.parts import CrossValidation as CrossValidation
    from openqa.api.parts import HeldOut as HeldOut
    from openqa.api.parts import ScoredQuestions as ScoredQuestions
    from openqa.api.parts import exam_bank as exam_bank
    from openqa.api.parts import score_parts as score_parts
    from openqa.api.workspace import corpus_paragraphs as corpus_paragraphs
    from openqa.data import Question as Question
    from openqa.data import dataset_spec as dataset_spec
    from openqa.data import load_questions as load_questions
    from openqa.data import read_question_file as read_question_file
    from openqa.data.formats import write_questions as write_questions
    from openqa.errors import DataError as DataError
    from openqa.errors import MissingExtraError as MissingExtraError
    from openqa.errors import OpenQAError as OpenQAError
    from openqa.errors import UsageError as UsageError
    from openqa.evaluate.results import read_result_set as read_result_set
    from openqa.evaluate.results import record_folder as record_folder
    from openqa.evaluate.results import run_record as run_record
    from openqa.languages import known_languages as known_languages
    from openqa.languages import language as language
    from openqa.llm.cache import ReplyCache as ReplyCache
    from openqa.llm.llamacpp import serve_gguf as serve_gguf
    from openqa.llm.scorer import LLMScorer as LLMScorer
    from openqa.llm.settings import LLMSettings as LLMSettings
    from openqa.llm.transformers_backend import TransformersBackend as TransformersBackend
    from openqa.methods.base import Estimate as Estimate
    from openqa.readers.bert import MultipleChoiceReader as MultipleChoiceReader
    from openqa.readers.train import TrainConfig as TrainConfig
    from openqa.retrieval.encoders import make_encoder as make_encoder
    from openqa.retrieval.encoders import resolve_model as resolve_model
    from openqa.retrieval.vector_search import TorchExactSearch as TorchExactSearch
    from openqa.scorers.bank import BankScorer as BankScorer
    from openqa.scorers.bank import QuestionBank as QuestionBank
    from openqa.scorers.ir import option_queries as option_queries
    from openqa.scorers.ir import question_query as question_query

#: Written out (not computed) so that type checkers read it.
__all__ = [
    "__version__", "Answer", "BatchHits", "Built", "Estimate", "Evaluation", "SearchHit", "Searcher", "Solver", "Tuning", "Workspace",
    "browse_results", "build_index", "corpus_fingerprint", "result_curves", "run_eval", "tune", "OpenQAError", "MissingExtraError", "DataError", "UsageError",
    "Question", "load_questions", "read_question_file", "write_questions", "dataset_spec", "corpus_paragraphs", "language",
    "known_languages", "option_queries", "question_query", "ScoredQuestions", "HeldOut", "CrossValidation", "score_parts",
    "exam_bank", "QuestionBank", "BankScorer", "LLMSettings", "record_folder", "run_record", "read_result_set", "make_encoder", "resolve_model",
    "TorchExactSearch", "serve_gguf", "TransformersBackend", "LLMScorer", "ReplyCache", "MultipleChoiceReader", "TrainConfig",
    "train_reader", "cross_fit_reader",
]


def __getattr__(name: str) -> Any:
    """The API's names, imported when first asked for (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'openqa' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
