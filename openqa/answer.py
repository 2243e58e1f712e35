"""Solving one question: rank its options and show the evidence with the query terms highlighted
(the parsing of pasted questions is ``openqa.data.pasted``)."""

from __future__ import annotations

import math
import re
from typing import Any

from openqa.data import Question
from openqa.retrieval.base import SearchEngine
from openqa.scorers.base import OptionScorer, OptionScores

_WORD = re.compile(r"\w+", re.UNICODE)


def no_match_message(lang: str) -> str:
    """What to say of a question none of whose words is in the ``lang`` index."""
    other = {"en": "zh", "zh": "en"}.get(lang)
    hint = f" (use --lang {other})" if other else ""
    return f"no word of the question or its options occurs in the {lang} index: is it in another language?{hint}"


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
        "prediction": result.prediction() if result.matched else None,
        "tied": result.tied_best() if len(result.tied_best()) > 1 and result.matched else [],
        "matched": result.matched,
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
    if not result.matched:
        return f"Prediction: none: {no_match_message(engine.manifest['lang'])}"
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
