"""Other benchmarks' question files, read into the same validated ``Question``s as MedQA's JSONL:
MIRAGE's benchmark JSON (``{dataset: {id: {question, options, answer}}}``, one dataset picked with
``subset``; its yes/no/maybe questions come as 2-3 options), MedMCQA JSON lines (``opa``..``opd``,
``cop`` counting from 1 as in the original release) and MMLU CSV (question, four options, answer
letter; a header row naming ``answer`` last is skipped). Every problem names the file and line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from openqa import arguments as arg
from openqa.data.questions import MAX_LINE_BYTES, Question, _parse_record, question_list
from openqa.errors import DataError, UsageError
from openqa.jsonl import decode, numbered_lines, unique_keys

#: Formats read here, besides MedQA's JSONL.
FORMATS = ("mirage", "medmcqa", "mmlu")


#: The numbered raw lines of a question file, read once (``read_lines``): a pipe cannot be read twice.
Lines = list[tuple[int, bytes]]


#: The largest MIRAGE benchmark file read (one JSON document, often on one line: all five subsets
#: of the real one fit).
MAX_MIRAGE_BYTES = 64 << 20


def read_lines(path: Path) -> Lines:
    """Every line of ``path`` with its number, from one read: each at most ``MAX_LINE_BYTES``, except
    a first line that opens a JSON object (a MIRAGE file on one line), which may reach ``MAX_MIRAGE_BYTES``."""
    try:
        lines = list(numbered_lines(path, MAX_MIRAGE_BYTES, "a question file"))
    except DataError as exc:
        if ": line longer than" not in str(exc):
            raise
        where = str(exc).split(": line longer than")[0]
        raise DataError(f"{where}: line longer than {MAX_LINE_BYTES:,} bytes: not a question file (nor a MIRAGE file "
                        f"of at most {MAX_MIRAGE_BYTES:,} bytes)") from None
    first = next((number for number, raw in lines if raw.strip()), None)
    for number, raw in lines:
        if len(raw) > MAX_LINE_BYTES and not (number == first and raw.lstrip(b"\xef\xbb\xbf \t").startswith(b"{")):
            raise DataError(f"{path}:{number}: line longer than {MAX_LINE_BYTES:,} bytes: not a question file")
    return lines


def _lines(path: Path, lines: Lines) -> Iterator[tuple[int, str]]:
    """The numbered lines of ``path`` as text (a byte-order mark dropped)."""
    for number, raw in lines:
        try:
            yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{path}:{number}: not valid UTF-8") from None


def detect(path: Path, lines: Lines) -> str:
    """The format of a question file: ``mmlu`` (a .csv), ``medmcqa`` (JSON lines with ``opa``),
    ``mirage`` (one JSON object of datasets), else ``medqa`` (MedQA's JSON lines); only the first
    line that is not blank is read."""
    if path.suffix.lower() == ".csv":
        return "mmlu"
    first = ""
    for number, raw in lines:
        if raw.strip():
            first = raw.decode("utf-8-sig" if number == 1 else "utf-8", errors="replace")
            break
    try:
        record = decode(first)
    except ValueError:
        record = None
    if isinstance(record, dict):
        if "opa" in record:
            return "medmcqa"
        if "question" in record or "options" in record:
            return "medqa"
        return "mirage"
    opening = first.strip()  # a MIRAGE file written over many lines opens with "{" and no closing brace
    return "mirage" if opening.startswith("{") and not opening.endswith("}") else "medqa"


def read_other(path: Path, lines: Lines, fmt: str, prefix: str, n_options: int | None, subset: str | None) -> list[Question]:
    """The questions of ``path`` in format ``fmt``."""
    if subset is not None and fmt != "mirage":
        raise DataError(f"{path}: --subset picks a dataset of a MIRAGE benchmark file; this is a {fmt} file")
    readers = {"mirage": _mirage, "medmcqa": _medmcqa, "mmlu": _mmlu}
    questions = readers[fmt](path, lines, prefix, n_options, subset)
    if not questions:
        raise DataError(f"{path}: no questions")
    return questions


def _line_of(text: str, needle: str, start: int = 0) -> int:
    """The line (from 1) where ``needle`` first occurs at or after ``start`` (1 if it does not)."""
    at = text.find(needle, start)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _mirage(path: Path, lines: Lines, prefix: str, n_options: int | None, subset: str | None) -> list[Question]:
    text = "".join(line for _, line in _lines(path, lines))
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)  # a repeated id is an error, not a lost question
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except (RecursionError, ValueError):
        try:
            decode(text)
        except ValueError as exc:  # nesting past the recursion limit, a huge integer, a repeated key
            raise DataError(f"{path}: not valid JSON ({exc})") from None
        raise
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise DataError(f"{path}:1: expected MIRAGE's {{dataset: {{id: {{question, options, answer}}}}}} object")
    names = list(data)
    if subset is None:
        if len(names) > 1:
            raise DataError(f"{path}: a MIRAGE file of {len(names)} datasets: pick one with --subset ({', '.join(names)})")
        subset = names[0]
    if subset not in data:
        raise DataError(f"{path}: no dataset {subset!r} in this MIRAGE file: choose one of {', '.join(names)}")
    start = text.find(json.dumps(subset))
    questions = []
    for qid, record in data[subset].items():
        try:
            if not isinstance(record, dict):
                raise ValueError(f"expected a JSON object, found {type(record).__name__}")
            medqa = {"question": record.get("question"), "options": record.get("options"), "answer_idx": record.get("answer")}
            questions.append(_parse_record(medqa, f"{subset}-{qid}", n_options))
        except ValueError as exc:  # its line is looked for only now (a search per question is slow on a large file)
            line = _line_of(text, json.dumps(qid), start)
            raise DataError(f"{path}:{line}: {subset} {qid}: {str(exc).replace('answer_idx', 'answer')}") from None
    return questions


def json_records(path: Path, lines: Lines) -> Iterator[tuple[int, Any]]:
    """The JSON value of each line of a JSON-lines file that is not blank, with its line number; a
    line that is not JSON is a ``file:line`` error."""
    for line_no, line in _lines(path, lines):
        if not line.strip():
            continue
        try:
            yield line_no, decode(line)
        except ValueError as exc:
            raise DataError(f"{path}:{line_no}: not valid JSON ({exc})") from None


def _medmcqa(path: Path, lines: Lines, prefix: str, n_options: int | None, subset: str | None) -> list[Question]:
    questions = []
    for line_no, record in json_records(path, lines):
        try:
            questions.append(_parse_record(_medmcqa_record(record), f"{prefix}-{line_no}", n_options))
        except ValueError as exc:
            raise DataError(f"{path}:{line_no}: {exc}") from None
    return questions


def _medmcqa_record(record: Any) -> dict[str, Any]:
    """A MedMCQA record in MedQA's form; ``cop`` 1-4 names the correct option (the original release)."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, found {type(record).__name__}")
    keys = ("opa", "opb", "opc", "opd")
    missing = [k for k in keys if k not in record]
    if missing:
        raise ValueError(f"missing option field {missing[0]!r} (MedMCQA's opa..opd)")
    cop = record.get("cop")
    if cop is None or cop == -1:
        raise ValueError("no answer ('cop'): MedMCQA's test split has none")
    if isinstance(cop, str) and cop.strip().isdigit():
        cop = int(cop)
    if not isinstance(cop, int) or not 1 <= cop <= 4:
        hint = " (cop counts from 1 in MedMCQA's release; add 1 to a 0-based copy)" if cop == 0 else ""
        raise ValueError(f"'cop' {cop!r} is not 1, 2, 3 or 4{hint}")
    options = {chr(ord("A") + i): record[k] for i, k in enumerate(keys)}
    return {"question": record.get("question"), "options": options, "answer_idx": chr(ord("A") + cop - 1)}


def _mmlu(path: Path, lines: Lines, prefix: str, n_options: int | None, subset: str | None) -> list[Question]:
    questions = []
    reader = csv.reader(io.StringIO("".join(line for _, line in _lines(path, lines))))
    while True:
        start = reader.line_num + 1  # the line the next row starts on
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DataError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
        line_no = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if line_no == 1 and len(row) == 6 and row[5].strip().lower() == "answer":
            continue  # a header row (question, A, B, C, D, answer)
        if len(row) != 6 and line_no > start and any("\n" in cell for cell in row):
            raise DataError(f"{path}:{start}: a quoted field is not closed (a \" without its closing \"): it runs on to line {line_no}")
        if len(row) != 6:
            raise DataError(f"{path}:{line_no}: expected 6 columns (question, four options, answer letter), found {len(row)}")
        medqa = {"question": row[0], "options": dict(zip("ABCD", row[1:5])), "answer_idx": row[5].strip()}
        try:
            questions.append(_parse_record(medqa, f"{prefix}-{line_no}", n_options))
        except ValueError as exc:
            raise DataError(f"{path}:{line_no}: {str(exc).replace('answer_idx', 'answer')}") from None
    return questions


def _write_medqa(questions: Sequence[Question], subset: str) -> str:
    return "".join(json.dumps({"question": q.question, "options": q.options, "answer_idx": q.answer_idx,
                               "answer": q.answer}, ensure_ascii=False) + "\n" for q in questions)


def _write_mirage(questions: Sequence[Question], subset: str) -> str:
    records = {f"{i:04d}": {"question": q.question, "options": q.options, "answer": q.answer_idx}
               for i, q in enumerate(questions)}
    return json.dumps({subset: records}, ensure_ascii=False)  # one line, as MIRAGE ships it


def _four_options(q: Question, fmt: str) -> list[str]:
    if list(q.options) != list("ABCD"):
        raise DataError(f"question {q.qid}: a {fmt} file holds 4 options A-D, this one has {len(q.options)}")
    return list(q.options.values())


def _write_medmcqa(questions: Sequence[Question], subset: str) -> str:
    return "".join(json.dumps({"question": q.question, **dict(zip(("opa", "opb", "opc", "opd"), _four_options(q, "medmcqa"))),
                               "cop": "ABCD".index(q.answer_idx) + 1}, ensure_ascii=False) + "\n" for q in questions)


def _write_mmlu(questions: Sequence[Question], subset: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for q in questions:
        writer.writerow([q.question, *_four_options(q, "mmlu"), q.answer_idx])
    return out.getvalue()


#: How questions are written in each format (MedQA's JSON lines and the ``FORMATS`` read here).
WRITERS: dict[str, Callable[[Sequence[Question], str], str]] = {
    "medqa": _write_medqa, "mirage": _write_mirage, "medmcqa": _write_medmcqa, "mmlu": _write_mmlu}


def write_questions(questions: Sequence[Question], path: str | Path, fmt: str, subset: str = "medqa") -> Path:
    """Write ``questions`` to ``path`` in format ``fmt``, so that one question set can be read back
    in every format (``read_question_file``): the texts, options and answers survive, the ids do not
    (they come from the file's name and line, or MIRAGE's keys).

    :param questions: the questions (a list of ``Question``).
    :param path: the file to write (replaced if it is there).
    :param fmt: ``medqa`` (JSON lines), ``mirage`` (one JSON object), ``medmcqa`` (JSON lines) or ``mmlu``
        (CSV; four options).
    :param subset: the dataset name a MIRAGE file files them under.
    :returns: the file written.
    :raises OpenQAError: on an unknown format, or a file that cannot be written (one line)."""
    questions = question_list("questions", questions)
    if not isinstance(fmt, str) or fmt not in WRITERS:
        raise DataError(f"unknown question format {arg.shown(fmt)}; choose one of: {', '.join(WRITERS)}")
    if not isinstance(subset, str):
        raise UsageError(f"subset must be text, not {type(subset).__name__}")
    where = arg.path("path", path)
    if where is None:
        raise UsageError("path must name a file, not None")
    text = WRITERS[fmt](questions, subset)
    try:
        where.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{where}: cannot write the questions ({exc.strerror or type(exc).__name__})") from None
    return where
