"""Question files of every format read into validated ``Question``s: a MedQA JSON-lines file, or a
MIRAGE, MedMCQA or MMLU file told apart by its first line or extension (``openqa.data.formats``),
and the splits of the registered datasets. It sits above ``questions`` (the record and the
registry) and ``formats`` (the other formats), which import nothing from it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from openqa import arguments as arg
from openqa.data.formats import detect, json_records, read_lines, read_other
from openqa.data.questions import SPLITS, Question, _parse_record, dataset_spec
from openqa.errors import DataError, UsageError


def read_question_file(
    path: str | Path, qid_prefix: str | None = None, n_options: int | None = None, subset: str | None = None,
) -> list[Question]:
    """The questions of a question file, validated (bad data is refused with its file and line): MedQA
    JSON lines, or a MIRAGE, MedMCQA or MMLU file told apart by its first line or extension.

    :param path: the file.
    :param qid_prefix: each question's id is ``PREFIX-LINE`` (default: the file's name without suffix).
    :param n_options: the number of options every question must have (default: any).
    :param subset: the dataset of a MIRAGE file to read (default: its only one).
    :returns: the questions, in file order.
    :raises OpenQAError: on a missing or unreadable file or a bad question (one line)."""
    where = arg.path("path", path)
    if where is None:
        raise UsageError("path must name a question file, not None")
    return read_question_file_digest(where, arg.optional_text("qid_prefix", qid_prefix),
                                     arg.optional_whole("n_options", n_options, 2), arg.optional_text("subset", subset))[0]


def read_question_file_digest(
    path: Path, qid_prefix: str | None = None, n_options: int | None = None, subset: str | None = None,
) -> tuple[list[Question], str]:
    """Read and validate a MedQA-format JSONL file, so bad data stops the run with file and line named.
    MIRAGE, MedMCQA and MMLU files are recognised by their first line or extension and read by
    ``openqa.data.formats`` (``subset``: the dataset of a MIRAGE file).

    Each question's id is ``f"{qid_prefix}-{line_number}"`` (prefix defaults to the file stem;
    line numbers count blank lines, which are skipped). ``answer``, when present, must equal the
    text of option ``answer_idx`` after stripping whitespace (it is exactly equal in every record
    of the shipped files); the Question always carries the option's text. Also returned: the
    SHA-256 of the bytes read, so a record names the file by content without reading it again
    (``/dev/stdin``, a FIFO: a second read would find nothing, or wait for a writer).
    """
    path = Path(path)
    prefix = path.stem if qid_prefix is None else qid_prefix
    lines = read_lines(path)  # once, then detected and parsed: a pipe (/dev/stdin) cannot be read again
    digest = hashlib.sha256(b"".join(raw for _, raw in lines)).hexdigest()
    fmt = detect(path, lines)
    if fmt != "medqa" or subset is not None:
        return read_other(path, lines, fmt, prefix, n_options, subset), digest
    questions: list[Question] = []
    for line_no, record in json_records(path, lines):  # a byte-order mark may open the file
        try:
            questions.append(_parse_record(record, f"{prefix}-{line_no}", n_options))
        except ValueError as exc:
            raise DataError(f"{path}:{line_no}: {exc}") from None

    if not questions:
        raise DataError(f"{path}: no questions")
    return questions, digest


def split_file(dataset: str, split: str, data_dir: Path) -> Path:
    """Where one split of a named dataset lives in ``data_dir`` (whether or not the file is there)."""
    return Path(data_dir) / "questions" / dataset_spec(dataset).files[split]


def load_questions(dataset: str, split: str, data_dir: Path) -> list[Question]:
    """Load one split of a named dataset from ``<data_dir>/questions``, never substituting another file.

    :param dataset: a named dataset (``us``, ``mainland``, ``tw-en``...).
    :param split: ``train``, ``dev`` or ``test``.
    :param data_dir: the MedQA data folder (the one holding ``questions/`` and ``textbooks/``).
    """
    spec = dataset_spec(dataset)
    if not isinstance(split, str) or split not in SPLITS:
        raise DataError(f"unknown split {arg.shown(split)}; choose one of: {', '.join(SPLITS)}")
    if not isinstance(data_dir, (str, os.PathLike)):
        raise DataError(f"the data folder must be a path, not {type(data_dir).__name__}")
    data_dir = arg.path("data_dir", data_dir) or Path()
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: data folder not found (set OPENQA_DATA or --data-dir)")

    path = split_file(dataset, split, data_dir)
    if split == "train" and not path.is_file():
        raise DataError(
            f"{path}: file not found: your data folder has no {dataset} train split (the full MedQA release "
            f"has one); train on a seeded split of dev instead, e.g. --train-split dev:0.8, or on all of dev by "
            f"cross-fitting, e.g. --cross-fit 5"
        )
    return read_question_file(path, qid_prefix=f"{dataset}-{split}", n_options=spec.n_options)
