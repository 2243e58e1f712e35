"""Reading the chosen letter out of a model's reply, robustly and never by guessing: a JSON
``answer`` field, an "answer is X" or "X is the correct answer" statement, a reply that is or starts with a letter
(unless it lists several options back), or one lone "(X)". A reply in which none of these is found, or which names two different letters the same way,
gives None: the question counts as wrong (a parse failure), it is never replaced by an option."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Sequence

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_OBJECT = re.compile(r"\{.*\}", re.S)
#: "the answer is C", "Answer: (B)", "The answer is: D", "**Answer:** C", "correct option is D",
#: "answer = A": the last one wins (a step-by-step reply concludes at its end). ``other`` catches a
#: second letter named beside it ("the answer is A or B"): such a reply answers nothing.
_OTHER = r"(?P<other>\s*(?:,|/|&|\bor\b|\band\b)\s*(?i:option\s*)?[\(\[\"'*]*[A-Z]\b(?![-']))?"
_STATED = re.compile(r"(?i:answer|correct option|correct choice)[*\s]*(?:(?i:is)\s*:?|:|=|-)?[*\s]*(?i:option\s*)?"
                     r"[\(\[\"'*]*([A-Z])\b(?![-'])" + _OTHER)
#: "D is the correct answer.", "Option B is correct.", "(C) is the best choice": a letter that opens
#: the reply or a sentence, or follows "option", then said to be correct.
_REVERSED = re.compile(r"(?:^|[.!?:]\s+|(?i:option|choice)\s+)[\(\[*]*([A-Z])[\)\]*.]*\s+(?i:is)\s+(?i:the\s+)?"
                       r"(?i:correct|right|best)\b", re.M)
_JSON_FIELD = re.compile(r"\"answer\"\s*:\s*\"?\(?([A-Z])\b")
_WHOLE = re.compile(r"^\s*[\(\[*]*([A-Z])[\)\]*.:]?\s*$")
_LEADING = re.compile(r"^\s*[\(\[*]*([A-Z])(?:[\)\]*.:]|\s*[-–]\s)")
_PAREN = re.compile(r"\(([A-Z])\)")
#: Lines that start like an option ("B. ...", "(C) ..."): a reply listing several options back answers none.
_LISTED = re.compile(r"^\s*[\(\[*]*([A-Z])[\)\]*.:]", re.M)
_VALUE = re.compile(r"^\s*[\(\[*]*([A-Z])(?:$|[\)\]*.:\s])")


def _json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a reply: the first in each fenced block, then the first in the whole reply."""
    for chunk in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        match = _OBJECT.search(chunk)
        if not match:
            continue
        try:
            data = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(data, dict):
            yield data


def _json_answer(text: str) -> tuple[bool, Any]:
    """(found, value) of the ``answer`` field of a JSON object in the reply (fenced or bare)."""
    for data in _json_objects(text):
        if "answer" in data:
            return True, data["answer"]
    return False, None


def extract_letter(reply: str, letters: Sequence[str]) -> str | None:
    """The option letter ``reply`` gives (one of ``letters``), or None when it gives none or is ambiguous."""
    known = set(letters)
    found, value = _json_answer(reply)
    if found:
        match = _VALUE.match(str(value)) if isinstance(value, str) else None
        return match.group(1) if match and match.group(1) in known else None
    for pattern in (_JSON_FIELD, _STATED, _REVERSED):
        hits = [m for m in pattern.finditer(reply) if m.group(1) in known]
        if hits:
            return None if "other" in hits[-1].groupdict() and hits[-1].group("other") else hits[-1].group(1)
    if len({m.group(1) for m in _LISTED.finditer(reply)} & known) > 1:
        return None
    for pattern in (_WHOLE, _LEADING):
        match = pattern.match(reply)
        if match and match.group(1) in known:
            return match.group(1)
    lone = {m.group(1) for m in _PAREN.finditer(reply)} & known
    return lone.pop() if len(lone) == 1 else None


def cited_ids(reply: str) -> list[str]:
    """The paragraph ids a reply's JSON ``cited`` field lists (empty when there is none)."""
    for data in _json_objects(reply):
        if isinstance(data.get("cited"), list):
            return [str(c) for c in data["cited"]]
    return []
