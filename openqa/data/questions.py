"""MedQA question files: the dataset registry, a validating JSONL reader and the dev split for training."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Sequence

from openqa.arguments import encodable, shown
from openqa.errors import DataError, UsageError
from openqa.languages import LANGUAGES
from openqa.text.unicode import normalize

#: Split names a dataset can be asked for, in the order of the original release.
SPLITS = ("train", "dev", "test")

#: The split a run of a question file (``eval --questions FILE``) records in place of a dataset's.
QUESTION_FILE = "file"

#: Splits that may be cut into training and selection parts (test never is).
TRAINABLE_SPLITS = ("train", "dev")


@dataclass(frozen=True)
class Question:
    """One multiple-choice question, validated, with an id that is stable across runs."""

    qid: str
    question: str
    options: dict[str, str]
    answer_idx: str
    answer: str
    meta_info: str | None = None
    metamap_phrases: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Normalise the text the way the corpus is (``openqa.text.unicode.normalize``), whatever
        made the question (a file, a paste, a request): a full-width, ligatured or zero-width-split
        word then finds the terms of its plain form, and bidirectional controls are dropped. Fields
        of the wrong type (a caller of the API passing None or bytes) and a question without options are
        refused in one line."""
        for name in ("qid", "question", "answer_idx", "answer"):
            if not isinstance(getattr(self, name), str):
                raise DataError(f"Question.{name} must be text, not {type(getattr(self, name)).__name__}")
        if not isinstance(self.options, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in self.options.items()):
            raise DataError("Question.options must map option letters to text")
        if not self.options:
            raise DataError(f"question {self.qid}: no options (a question needs at least one to choose from)")
        if self.meta_info is not None and not isinstance(self.meta_info, str):
            raise DataError(f"Question.meta_info must be text or None, not {type(self.meta_info).__name__}")
        phrases = self.metamap_phrases
        if phrases is not None:
            if isinstance(phrases, str) or not isinstance(phrases, (list, tuple)) or not all(isinstance(p, str) for p in phrases):
                raise DataError("Question.metamap_phrases must be None or a list of texts")
            object.__setattr__(self, "metamap_phrases", tuple(phrases))
        texts = [self.qid, self.question, self.answer_idx, self.answer, *self.options, *self.options.values(), *(phrases or ())]
        if not all(map(encodable, texts)) or (self.meta_info is not None and not encodable(self.meta_info)):
            raise DataError(f"question {self.qid[:40]!r}: its text holds a lone surrogate (not UTF-8)")
        for name in ("question", "answer"):
            object.__setattr__(self, name, normalize(getattr(self, name)))
        object.__setattr__(self, "options", {letter: normalize(text) for letter, text in self.options.items()})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form, so predictions and reports can carry the question."""
        return {
            "qid": self.qid,
            "question": self.question,
            "options": dict(self.options),
            "answer_idx": self.answer_idx,
            "answer": self.answer,
            "meta_info": self.meta_info,
            "metamap_phrases": None if self.metamap_phrases is None else list(self.metamap_phrases),
        }

    def digest(self) -> str:
        """The question's identity by content: a digest of its text and its lettered options (what a
        predictions file is matched by, never an id, a file name or a position)."""
        return self.content_digest(*(f"{letter}\x01{text}" for letter, text in sorted(self.options.items())))

    def content_digest(self, *parts: str) -> str:
        """A digest of the question's text and ``parts`` (an option's text, say), each stripped: what
        depends on it (a tie-break, a shuffle of options) is the same whatever file, format, name or
        line carries the question, never on its id."""
        for number, part in enumerate(parts, start=1):
            if not isinstance(part, str) or not encodable(part):
                raise UsageError(f"part {number} of the digest must be UTF-8 text, not {type(part).__name__}")
        blob = "\x00".join(part.strip() for part in (self.question, *parts))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class DatasetSpec:
    """Where a named dataset's splits live and how to answer it (corpus language, option count)."""

    name: str
    lang: str
    n_options: int
    files: dict[str, str]
    description: str
    exam: str  # "usmle", "mcmle" or "twmle": selects the paper's per-exam BM25 query parameters


#: The datasets the project knows, by name; paths are relative to ``<data_dir>/questions``.
#: ``us5`` and ``tw-en`` read the MetaMap files, which hold the same records as ``US/{split}.jsonl``
#: and ``Taiwan/tw_translated_jsonl/en/{split}-2en.jsonl`` plus ``metamap_phrases``.
DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="us",
            exam="usmle",
            lang="en",
            n_options=4,
            files={
                "train": "US/4_options/phrases_no_exclude_train.jsonl",
                "dev": "US/4_options/phrases_no_exclude_dev.jsonl",
                "test": "US/4_options/phrases_no_exclude_test.jsonl",
            },
            description="USMLE (English), 4 options, with metamap_phrases",
        ),
        DatasetSpec(
            name="us5",
            exam="usmle",
            lang="en",
            n_options=5,
            files={
                "train": "US/metamap_extracted_phrases/train/phrases_train.jsonl",
                "dev": "US/metamap_extracted_phrases/dev/phrases_dev.jsonl",
                "test": "US/metamap_extracted_phrases/test/phrases_test.jsonl",
            },
            description="USMLE (English), 5 options, with metamap_phrases",
        ),
        DatasetSpec(
            name="mainland",
            exam="mcmle",
            lang="zh",
            n_options=4,
            files={
                "train": "Mainland/4_options/train.jsonl",
                "dev": "Mainland/4_options/dev.jsonl",
                "test": "Mainland/4_options/test.jsonl",
            },
            description="MCMLE (simplified Chinese), 4 options",
        ),
        DatasetSpec(
            name="mainland5",
            exam="mcmle",
            lang="zh",
            n_options=5,
            files={
                "train": "Mainland/train.jsonl",
                "dev": "Mainland/dev.jsonl",
                "test": "Mainland/test.jsonl",
            },
            description="MCMLE (simplified Chinese), 5 options",
        ),
        DatasetSpec(
            name="tw",
            exam="twmle",
            lang="zh",
            n_options=4,
            files={
                "train": "Taiwan/train.jsonl",
                "dev": "Taiwan/dev.jsonl",
                "test": "Taiwan/test.jsonl",
            },
            description="TWMLE original (traditional Chinese, options often English), 4 options",
        ),
        DatasetSpec(
            name="tw-en",
            exam="twmle",
            lang="en",
            n_options=4,
            files={
                "train": "Taiwan/metamap/train/tw_train.jsonl",
                "dev": "Taiwan/metamap/dev/tw_dev.jsonl",
                "test": "Taiwan/metamap/test/tw_test.jsonl",
            },
            description="TWMLE machine-translated to English, 4 options, with metamap_phrases",
        ),
        DatasetSpec(
            name="tw-zh",
            exam="twmle",
            lang="zh",
            n_options=4,
            files={
                "train": "Taiwan/tw_translated_jsonl/zh/train-2zh.jsonl",
                "dev": "Taiwan/tw_translated_jsonl/zh/dev-2zh.jsonl",
                "test": "Taiwan/tw_translated_jsonl/zh/test-2zh.jsonl",
            },
            description="TWMLE converted to simplified Chinese, 4 options",
        ),
    )
}


def _option_letters(n: int) -> list[str]:
    """The letters a question with n options must use, in order: A, B, C, ..."""
    return [chr(ord("A") + i) for i in range(n)]


def _parse_record(record: Any, qid: str, n_options: int | None) -> Question:
    """Check one decoded JSON line and build its Question; raises ValueError saying what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, found {type(record).__name__}")

    question = record.get("question")
    if not isinstance(question, str) or not normalize(question).strip():
        raise ValueError("missing or empty 'question'")

    options = record.get("options")
    if not isinstance(options, dict) or len(options) < 2:
        raise ValueError("'options' must be an object of at least two letter -> text entries")
    for letter, text in options.items():
        if not isinstance(text, str) or not normalize(text).strip():
            raise ValueError(f"option {letter!r} is not a non-empty string")
    letters = _option_letters(len(options))
    if list(options) != letters:
        raise ValueError(f"option letters must be {', '.join(letters)} in order, found {', '.join(options)}")
    if n_options is not None and len(options) != n_options:
        raise ValueError(f"expected {n_options} options, found {len(options)}")

    answer_idx = record.get("answer_idx")
    if not isinstance(answer_idx, str) or answer_idx not in options:
        raise ValueError(f"'answer_idx' {answer_idx!r} is not one of the option letters {', '.join(options)}")
    answer = record.get("answer")
    if answer is not None and (not isinstance(answer, str) or normalize(answer).strip() != normalize(options[answer_idx]).strip()):
        raise ValueError(f"'answer' {answer!r} is not the text of option {answer_idx}")

    meta_info = record.get("meta_info")
    if meta_info is not None and not isinstance(meta_info, str):
        raise ValueError("'meta_info' is not a string")

    phrases = record.get("metamap_phrases")
    if phrases is not None and (not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases)):
        raise ValueError("'metamap_phrases' is not a list of strings")

    return Question(
        qid=qid,
        question=question,
        options=dict(options),
        answer_idx=answer_idx,
        answer=options[answer_idx],
        meta_info=meta_info,
        metamap_phrases=None if phrases is None else tuple(phrases),
    )


#: The longest line a question file may hold (MedQA's longest is under 10 KB): a longer one means
#: the file is no question file (``--questions /dev/zero`` would otherwise be read until memory ends).
MAX_LINE_BYTES = 1 << 20


def question_list(name: str, value: Any) -> list[Question]:
    """``value``, a list (or tuple) of ``Question``s, as a list; refused in one line otherwise."""
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"{name} must be a list of questions, not {'None' if value is None else type(value).__name__}")
    for number, item in enumerate(value, start=1):
        if not isinstance(item, Question):
            raise UsageError(f"{name}: item {number} must be a Question, not {type(item).__name__}")
    return list(value)


def dataset_spec(dataset: str) -> DatasetSpec:
    """The registered dataset ``dataset`` (its language, exam, split files and number of options).

    :param dataset: a named dataset (``us``, ``mainland``, ``tw-en``...).
    :returns: its ``DatasetSpec``: ``lang``, ``exam``, ``files`` (split -> file under ``questions/``)...
    :raises OpenQAError: on an unknown name (one line listing the known ones)."""
    spec = DATASETS.get(dataset) if isinstance(dataset, str) else None
    if spec is None:
        raise UsageError(f"unknown dataset {shown(dataset)}; choose one of: {', '.join(DATASETS)}")
    return spec


#: The exam a question file or pasted question is scored as, when no ``--exam`` is given.
DEFAULT_EXAMS = {code: lang.default_exam for code, lang in LANGUAGES.items()}


def exam_dataset(lang: str, exam: str) -> str:
    """The dataset whose dev-tuned settings score questions of ``exam`` in ``lang``: the first
    4-option dataset registered for them (usmle/en: us, mcmle/zh: mainland, twmle: tw-en or tw)."""
    for spec in DATASETS.values():
        if spec.lang == lang and spec.exam == exam and spec.n_options == 4:
            return spec.name
    exams = sorted({(s.exam, s.lang) for s in DATASETS.values()})
    named = f" (--exam names an exam; dataset {exam} is scored as {DATASETS[exam].exam})" if exam in DATASETS else ""
    raise UsageError(f"no {lang} dataset for exam {exam!r}{named}: choose one of "
                     + ", ".join(f"{e} ({l})" for e, l in exams))


def split_questions(
    questions: Sequence[Question], fraction: float = 0.8, seed: int = 13
) -> tuple[list[Question], list[Question]]:
    """Cut questions by a seeded shuffle into training and selection parts (for a data folder without a train split).

    The first part holds ``round(fraction * len(questions))`` questions; both parts keep the
    shuffled order. US dev (1272) gives 1018 / 254, Mainland (3425) 2740 / 685, Taiwan (1412) 1130 / 282.
    """
    if not 0.0 < fraction < 1.0:
        raise DataError(f"split fraction must be between 0 and 1 (exclusive), got {fraction}")
    n_train = round(fraction * len(questions))
    if n_train == 0 or n_train == len(questions):
        raise DataError(f"cannot split {len(questions)} questions at {fraction}: one part would be empty")
    order = list(range(len(questions)))
    random.Random(seed).shuffle(order)
    return [questions[i] for i in order[:n_train]], [questions[i] for i in order[n_train:]]


def parse_train_split(spec: str) -> tuple[str, float]:
    """Parse a ``--train-split`` value such as ``dev:0.8`` into (split, fraction), rejecting test."""
    usage = "expected SPLIT:FRACTION such as dev:0.8"
    name, sep, value = spec.strip().partition(":")
    name = name.strip()
    if not sep:
        raise DataError(f"invalid train split {spec!r}: {usage}")
    if name not in TRAINABLE_SPLITS:
        raise DataError(
            f"invalid train split {spec!r}: split must be one of {', '.join(TRAINABLE_SPLITS)} "
            f"(test is never used for training or selection)"
        )
    try:
        fraction = float(value)
    except ValueError:
        raise DataError(f"invalid train split {spec!r}: {usage}") from None
    if not 0.0 < fraction < 1.0:
        raise DataError(f"invalid train split {spec!r}: fraction must be between 0 and 1 (exclusive)")
    return name, fraction
