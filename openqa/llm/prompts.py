"""Prompts from the versioned templates shipped in ``openqa/llm/templates``: the question, its
options (in a given order), the evidence paragraphs in rank order with their ids, and what the
reply must be. The templates' hash goes into every record, so a changed wording is never mistaken
for the same run."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Callable, Sequence

from openqa.data import Question

#: The template set in use; a changed wording gets a new version (and a new hash).
TEMPLATE_VERSION = "v1"
#: Template names: the system message, the user message, the evidence block and the three instructions.
TEMPLATE_NAMES = ("system", "user", "evidence", "letters", "direct", "cot")

Messages = list[dict[str, str]]


def check_messages(messages: object) -> Messages:
    """Chat messages as backends read them (a list of dicts, each a text ``role`` and ``content``), or a
    one-line error."""
    from openqa.errors import UsageError

    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages):
        raise UsageError("messages must be a list of dicts, each with a text 'role' and 'content'")
    return messages


@lru_cache(maxsize=None)
def template(name: str) -> str:
    """The text of template ``name`` of the current version."""
    return resources.files("openqa.llm").joinpath(f"templates/{name}.{TEMPLATE_VERSION}.txt").read_text(encoding="utf-8")


def template_hash(instruction: str) -> str:
    """SHA-256 (first 16 hex digits) of the templates a run with ``instruction`` uses."""
    names = ("system", "user", "evidence", instruction)
    digest = hashlib.sha256("\x00".join(f"{n}\x00{template(n)}" for n in names).encode("utf-8"))
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Passage:
    """An evidence paragraph: its id in the corpus and its text."""

    pid: str
    text: str


def option_block(question: Question, order: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The options listed as A., B., ... in ``order`` (original letters), and shown letter -> original letter."""
    shown = [chr(ord("A") + i) for i in range(len(order))]
    lines = [f"{s}. {question.options[o]}" for s, o in zip(shown, order)]
    return "\n".join(lines), dict(zip(shown, order))


def evidence_block(passages: Sequence[Passage]) -> str:
    """The evidence part of the user message (empty without passages)."""
    if not passages:
        return ""
    lines = "\n".join(f"[{p.pid}] {p.text}" for p in passages)
    return Template(template("evidence")).substitute(paragraphs=lines)


def build_messages(question: Question, order: Sequence[str], passages: Sequence[Passage], instruction: str,
                   demonstrations: Sequence[Question] = ()) -> Messages:
    """System and user messages for one question with its options in ``order`` and the given passages,
    after each of ``demonstrations`` (solved questions, options in their own order, no evidence)
    asked the same way and answered with its letter."""
    def asked(q: Question, shown_order: Sequence[str], shown_passages: Sequence[Passage]) -> str:
        options, _ = option_block(q, shown_order)
        return Template(template("user")).substitute(
            evidence=evidence_block(shown_passages), question=q.question.strip(), options=options,
            instruction=template(instruction).strip(),
        )

    messages = [{"role": "system", "content": template("system").strip()}]
    for shot in demonstrations:  # the answer as the reply a letter prompt asks for
        messages += [{"role": "user", "content": asked(shot, list(shot.options), [])},
                     {"role": "assistant", "content": shot.answer_idx}]
    return messages + [{"role": "user", "content": asked(question, order, passages)}]


def fit_passages(
    passages: Sequence[Passage], budget: int, count: Callable[[str], int]
) -> tuple[list[Passage], bool]:
    """The passages, in rank order, that fit ``budget`` tokens as ``count`` counts them (whole
    paragraphs only; a first paragraph longer than the budget is cut to it), and whether any was left out."""
    kept: list[Passage] = []
    used = 0
    for p in passages:
        cost = count(f"[{p.pid}] {p.text}\n")
        if used + cost > budget:
            if not kept and budget > 0:  # cut the best paragraph rather than give none
                words = p.text.split()
                while words and count(f"[{p.pid}] {' '.join(words)}\n") > budget:
                    words = words[: max(1, len(words) * 3 // 4)] if len(words) > 1 else []
                if words:
                    kept.append(Passage(p.pid, " ".join(words)))
            return kept, True
        kept.append(p)
        used += cost
    return kept, False
