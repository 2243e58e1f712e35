"""What the page shows beside a user's own question: real MedQA example questions with their answer
key, and each method's measured accuracy, both read at run time (nothing is copied into the page).

Examples follow a rule fixed in advance, not a choice of questions openqa happens to answer right:
the first ``EXAMPLES`` questions of the language's test split (US for English, Mainland for
Chinese), in file order, read from the data folder the server was given (``OPENQA_DATA`` or
``--data-dir``). Without one, the page shows none.

Accuracy: the summary ``openqa eval`` wrote for the method on that test split with its dev-tuned
settings (``<dataset>-test-<method>.json``: no variant, no limit, over the textbooks), looked up
in the results folder (``OPENQA_RESULTS``, else ``./eval/results``), then in the records shipped in
the repository beside the package (``eval/results``); in each, directly inside it or in the folder
where the repository keeps that dataset's runs (``runs/<exam>``: ``openqa.evaluate.results.find_record``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import openqa
from openqa.config import Settings
from openqa.data import load_questions
from openqa.errors import OpenQAError
from openqa.evaluate.results import find_record
from openqa.methods import METHODS
from openqa.workspace import Exam

#: How many example questions per language.
EXAMPLES = 5
#: The result records shipped with openqa (the repository's ``eval/results``).
SHIPPED_RESULTS = Path(openqa.__file__).resolve().parents[1] / "eval" / "results"
#: How the page names datasets and methods.
DATASET_NAMES = {"us": "MedQA US", "mainland": "MedQA Mainland (MCMLE)"}


def rule(lang: str) -> str:
    """How the examples of ``lang`` are chosen, as the page states it."""
    dataset = Exam.resolve(lang=lang).dataset
    return (f"the first {EXAMPLES} questions of the {DATASET_NAMES.get(dataset, dataset)} test split, in file order "
            "(a fixed rule: not chosen by whether openqa answers them right)")


@lru_cache(maxsize=4)
def examples(data_dir: Path | None, lang: str) -> dict[str, Any]:
    """The example questions of ``lang`` with their answer keys, and the rule that chose them
    (none, with a note, when the data folder is not at hand)."""
    exam = Exam.resolve(lang=lang)
    out: dict[str, Any] = {"lang": lang, "dataset": exam.dataset, "split": "test", "rule": rule(lang), "questions": []}
    if data_dir is None:
        return {**out, "note": "the server was started without a MedQA data folder"}
    try:
        questions = load_questions(exam.dataset, "test", data_dir)[:EXAMPLES]
    except OpenQAError:
        return {**out, "note": f"the data folder holds no readable {DATASET_NAMES.get(exam.dataset, exam.dataset)} test split"}
    out["questions"] = [{"id": f"{exam.dataset}-test-{number}", "number": number, "question": q.question,
                         "options": q.options, "answer": q.answer_idx}
                        for number, q in enumerate(questions, start=1)]
    return out


#: Settings a record gives that do not change its accuracy (where settings came from; the
#: calibration, which turns scores into probabilities without reordering them).
ACCURACY_NEUTRAL = frozenset({"sources", "probabilities"})


def measured_accuracy(settings: Settings, method: str, lang: str, corpus: str | None,
                      used: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The method's accuracy on the language's test split from its result record, with the
    sentence the page shows; None without such a record, over a named corpus, or when a setting
    the record gives has another value in ``used`` (the settings the server scores with: the
    operator's own tuning or flags), since that number was not measured with them."""
    if corpus is not None:
        return None
    dataset = Exam.resolve(lang=lang).dataset
    name = f"{dataset}-test-{method}.json"
    for folder in dict.fromkeys((Path(settings.results_dir).resolve(), SHIPPED_RESULTS)):
        path = find_record(folder, name)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            accuracy, n = float(record["accuracy"]), int(record["n"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if (record.get("dataset"), record.get("split"), record.get("method")) != (dataset, "test", method) \
                or record.get("variant") or record.get("limit"):
            continue
        measured = record.get("settings") or {}
        if used is not None and any(key not in ACCURACY_NEUTRAL and key in used and used[key] != value
                                    for key, value in measured.items()):
            continue
        books = re.search(r"(\d+) books", str(record.get("corpus", "")))
        where = f"{n:,} questions" + (f", {books.group(1)} books" if books else "")
        return {"dataset": dataset, "split": "test", "n": n, "accuracy": accuracy, "record": f"eval/results/{path.relative_to(folder).as_posix()}",
                "books": int(books.group(1)) if books else None,
                "sentence": f"{METHODS[method].shown_name}: {accuracy:.1f}% on {DATASET_NAMES.get(dataset, dataset)} "
                            f"test ({where}); a baseline, not medical advice."}
    return None
