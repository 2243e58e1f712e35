"""Interactive solving: parse a pasted question, rank its options, show highlighted evidence."""

from __future__ import annotations

import math
import re
from typing import Any

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.retrieval.base import SearchEngine
from openqa.scorers.base import OptionScorer, OptionScores

_OPTION_LINE = re.compile(r"^\s*\(?([A-Ja-j])\s*[:.)=]\s*(.+?)\s*$")
_WORD = re.compile(r"\w+", re.UNICODE)


def make_question(text: str, options: dict[str, str], qid: str = "interactive") -> Question:
    """A question from free text and lettered options, with one-line errors for bad input."""
    text = text.strip()
    if not text:
        raise OpenQAError("empty question: give the question text before the options")
    if len(options) < 2:
        raise OpenQAError("give at least two options, one per line as 'A: text' (or --option A=text)")
    empty = [k for k, v in options.items() if not v.strip()]
    if empty:
        raise OpenQAError(f"option {empty[0]} is empty")
    first = next(iter(options))
    return Question(qid, text, dict(options), first, options[first], None, None)


def parse_block(block: str) -> Question:
    """Parse pasted text: question lines, then option lines such as ``A: ...`` / ``B) ...``."""
    question_lines, options = [], {}
    for line in block.splitlines():
        match = _OPTION_LINE.match(line)
        if match:
            options[match.group(1).upper()] = match.group(2)
        elif line.strip():
            if options:
                raise OpenQAError(f"text after the options: {line.strip()[:60]!r}; put options last")
            question_lines.append(line.strip())
    return make_question(" ".join(question_lines), options)


def parse_option_flags(flags: list[str]) -> dict[str, str]:
    """``["A=text", ...]`` from ``--option`` flags into an ordered dict."""
    options = {}
    for flag in flags:
        letter, sep, text = flag.partition("=")
        if not sep or len(letter.strip()) != 1 or not letter.strip().isalpha():
            raise OpenQAError(f"--option must look like 'A=text', not {flag!r}")
        options[letter.strip().upper()] = text.strip()
    return options


def solve(scorer: OptionScorer, question: Question) -> OptionScores:
    """Score one question's options (the whole batch is this one question)."""
    return scorer.score([question], progress=False)[0]


def highlight(text: str, terms: set[str], engine: SearchEngine, color: bool) -> str:
    """Mark the words of ``text`` whose index terms occur in the query."""
    tok = engine.tokenizer

    def mark(word: str) -> str:
        return f"\033[1;33m{word}\033[0m" if color else f"**{word}**"

    if tok.lang == "zh":  # no spaces: mark the query terms themselves, longest first
        words = sorted((t for t in terms if len(t) > 1 or not t.isascii()), key=len, reverse=True)
        if not words:
            return text
        pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
        return pattern.sub(lambda m: mark(m.group(0)), text)
    return _WORD.sub(lambda m: mark(m.group(0)) if set(tok.tokenize(m.group(0))) & terms else m.group(0), text)


def as_dict(result: OptionScores, engine: SearchEngine, evidence: int) -> dict[str, Any]:
    """The ranked options with their best evidence paragraphs, for ``--json``."""
    ranked = sorted(result.scores.items(), key=lambda kv: -kv[1])
    return {
        "question": result.question.question,
        "prediction": result.prediction(),
        "tied": result.tied_best() if len(result.tied_best()) > 1 else [],
        "options": [
            {
                "letter": letter,
                "text": result.question.options[letter],
                "score": round(score, 4) if math.isfinite(score) else None,
                "evidence": [
                    {"id": p.pid, "book": p.book, "score": round(h.score, 4), "text": p.text}
                    for h in result.evidence.get(letter, [])[:evidence]
                    for p in [engine.paragraphs[h.index]]
                ],
            }
            for letter, score in ranked
        ],
    }


def render(result: OptionScores, engine: SearchEngine, top_options: int, evidence: int, color: bool) -> str:
    """Human-readable ranking, with evidence for the ``top_options`` best options."""
    data = as_dict(result, engine, evidence)
    lines = [f"Prediction: {data['prediction']}" + (f"  (tied: {', '.join(data['tied'])})" if data["tied"] else "")]
    for rank, opt in enumerate(data["options"]):
        score = "no evidence" if opt["score"] is None else f"score {opt['score']:.3f}"
        lines.append(f"  {opt['letter']}. {opt['text']}  {score}")
        if rank >= top_options:
            continue
        query = f"{result.question.question} {opt['text']}"
        terms = set(engine.tokenizer.tokenize(engine.tokenizer.prepare_query(query)))
        for ev in opt["evidence"]:
            text = highlight(ev["text"][:600], terms, engine, color)
            lines.append(f"      [{ev['book']} {ev['id']}, {ev['score']:.2f}] {text}")
    return "\n".join(lines)
