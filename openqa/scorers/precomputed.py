"""An ensemble part read from a predictions file instead of being run: an LLM's letter probabilities
scored once (on another machine, a GPU, a larger model elsewhere) and fused with openqa's scorers
without the model, or any outside system's per-option scores.

The file is JSON lines, one question a line, as openqa's own ``<stem>.predictions.jsonl`` writes them
or in this minimal form::

    {"digest": "<Question.digest() of the question>", "scores": {"A": 0.2, "B": 0.5, ...}, "scale": "probability"}

``digest`` names the question by its content (its text and lettered options; ``qid``, the question's
id, is used only when a row has no digest); ``scores`` has one number (or null: no score) per option
letter; ``scale`` says what the numbers are (``openqa.scorers.logits``: ``probability`` for
probabilities, ``standardized`` for raw scores, ``logits`` for logits; ``log-probability``, the name
``probability`` was written under before, still reads as it). Questions are matched by content, never
by position or file name; a question the file lacks is a one-line error naming it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from openqa.data import Question
from openqa.errors import DataError
from openqa.jsonl import decode_at, numbered_lines, text_line
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.logits import known_scales, scale_named

#: The longest line of a predictions file.
MAX_ROW_BYTES = 1 << 20
#: The largest score (in size) read: past it, fusing the scores overflows and a part or a vote is lost.
MAX_SCORE = 1e12


def _number(where: str, letter: str, score: Any) -> float | None:
    """A row's score of ``letter``: null, or a finite number no larger than ``MAX_SCORE`` in size;
    anything else a one-line error at ``where`` (NaN and Infinity would drop the question's vote,
    1e308 or a 400-digit integer overflow when the parts are fused)."""
    if score is None:
        return None
    shown = repr(score) if len(repr(score)) <= 24 else f"{repr(score)[:20]}... ({len(repr(score))} characters)"
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise DataError(f"{where}: the score of {letter} is {shown}, not a number or null")
    try:
        value = float(score)
    except OverflowError:
        value = math.inf
    if not (math.isfinite(value) and abs(value) <= MAX_SCORE):
        raise DataError(f"{where}: the score of {letter} is {shown}, not a finite number of at most {MAX_SCORE:g} "
                        "in size (give null for no score)")
    return value


def _row(where: str, raw: bytes) -> dict[str, Any] | None:
    """One line of the file, checked (``checked_row``); None for a blank one."""
    line = text_line(where, raw)
    if not line.strip():
        return None
    return checked_row(where, decode_at(where, line))


def checked_row(where: str, row: Any) -> dict[str, Any]:
    """A part's row (decoded JSON), checked: a digest or id, scores by letter (numbers or null), a
    known scale, and on the ``probability`` scale only numbers from 0 to 1 (2.0 or -0.5 would be
    floored or logged as if they were probabilities); anything else a one-line ``DataError`` at
    ``where``. Scripts that write parts check their rows with it, before writing."""
    if not isinstance(row, dict) or not isinstance(row.get("scores"), dict):
        raise DataError(f"{where}: expected an object with \"digest\" (or \"qid\"), \"scores\" and \"scale\"")
    if not isinstance(row.get("digest", row.get("qid")), str):
        raise DataError(f"{where}: the row names no question: give \"digest\" (Question.digest()) or \"qid\"")
    scale = scale_named(row.get("scale"))
    if scale is None:
        raise DataError(f"{where}: \"scale\" must be one of {known_scales()}, not {row.get('scale')!r}")
    row["scale"] = scale
    row["scores"] = {letter: _number(where, letter, score) for letter, score in row["scores"].items()}
    outside = next(((letter, v) for letter, v in row["scores"].items() if v is not None and not 0 <= v <= 1), None)
    if scale == "probability" and outside is not None:
        raise DataError(f"{where}: the score of {outside[0]} is {outside[1]!r}, not a probability from 0 to 1 (the row's "
                        "scale is probability)")
    return row


class PrecomputedScorer(OptionScorer):
    """Option scores read from a predictions file (see the module), under the part ``label``."""

    def __init__(self, path: Path, label: str) -> None:
        self.path = Path(path)
        self.label = label
        self.by_digest: dict[str, dict[str, Any]] = {}
        self.by_qid: dict[str, dict[str, Any]] = {}
        scales = set()
        lines: dict[tuple[str, str], int] = {}
        for number, raw in numbered_lines(self.path, MAX_ROW_BYTES, "a predictions file"):
            row = _row(f"{self.path}:{number}", raw)
            if row is None:
                continue
            scales.add(row["scale"])
            kind, rows = ("digest", self.by_digest) if "digest" in row else ("qid", self.by_qid)
            key = row[kind]
            if key in rows and (rows[key]["scores"], rows[key]["scale"]) != (row["scores"], row["scale"]):
                # the same question scored twice, otherwise: which row counts would be the file's order
                raise DataError(f"{self.path}:{number}: question {kind} {key[:40]!r} is scored again, with other "
                                f"scores than on line {lines[(kind, key)]}: keep one row per question")
            lines.setdefault((kind, key), number)
            rows[key] = row
        if not scales:
            raise DataError(f"{self.path}: no predictions")
        if len(scales) > 1:
            raise DataError(f"{self.path}: rows on several scales ({', '.join(sorted(scales))}): one scale per file")
        self.scale = scales.pop()

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        out = []
        for q in questions:
            row = self.by_digest.get(q.digest()) or self.by_qid.get(q.qid)
            if row is None:
                preview = " ".join(q.question.split())[:60]
                raise DataError(f"{self.path}: no scores for question {q.qid} ({preview!r}): part {self.label} "
                                f"holds {len(self.by_digest) + len(self.by_qid)} questions")
            if set(row["scores"]) != set(q.options):
                raise DataError(f"{self.path}: question {q.qid} has options {', '.join(q.options)}, "
                                f"the file's row {', '.join(row['scores'])}")
            scores = {letter: math.nan if row["scores"][letter] is None else row["scores"][letter] for letter in q.options}
            out.append(OptionScores(q, scores, matched=any(math.isfinite(v) for v in scores.values())))
        return out
