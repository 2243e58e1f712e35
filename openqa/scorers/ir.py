"""IR option scorers (the paper's IR-Custom and IR-ES): query = question + option, score = an
aggregate of the option's top-N paragraph scores, over any retrieval engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from tqdm import tqdm

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.retrieval.base import Hit, SearchEngine
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.text.medical_filter import filter_question

#: How an option's top-N paragraph scores become one number.
AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "sum": lambda s: float(s.sum()),
    "max": lambda s: float(s.max(initial=0.0)),
    "decay": lambda s: float((s / np.arange(1, len(s) + 1)).sum()),
}

#: Which words of the question go into the query (the modes ``openqa tune`` searches).
TUNED_QUERY_MODES = ("phrases", "filter", "full")
#: ... and ``option``: none, the option alone, so that each option finds its own evidence for a reader.
QUERY_MODES = (*TUNED_QUERY_MODES, "option")


@dataclass(frozen=True)
class IRSettings:
    """Top-N, aggregate and query mode (``phrases`` falls back to ``filter`` without phrases);
    for the hybrid engine also the fusion (``rrf`` or ``weighted``) and the first engine's weight."""

    top_n: int = 10
    aggregate: str = "sum"
    query: str = "phrases"
    fusion: str = "rrf"
    weight: float = 0.5

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise OpenQAError(f"unknown aggregate {self.aggregate!r}: choose one of {sorted(AGGREGATES)}")
        if self.query not in QUERY_MODES:
            raise OpenQAError(f"unknown query mode {self.query!r}: choose one of {QUERY_MODES}")
        if self.top_n < 1:
            raise OpenQAError(f"--top-n must be at least 1, not {self.top_n}")


def question_query(question: Question, mode: str, lang: str) -> str:
    """The question part of every option query: MetaMap phrases, filtered words, the full text or nothing."""
    if mode == "option":
        return ""
    if mode == "phrases" and question.metamap_phrases:
        return " ".join(question.metamap_phrases)
    if mode == "full":
        return question.question
    return filter_question(question.question, lang)


def option_queries(question: Question, mode: str, lang: str) -> list[str]:
    """One query per option, in option order: question part + option text."""
    stem = question_query(question, mode, lang)
    return [f"{stem} {text}".strip() for text in question.options.values()]


def aggregate(hits: list[Hit], top_n: int, how: str) -> float:
    """Aggregate the scores of the first ``top_n`` hits."""
    return AGGREGATES[how](np.array([h.score for h in hits[:top_n]], dtype=np.float64))


class IRScorer(OptionScorer):
    """Ranks options by the evidence an engine finds for question + option."""

    name = "ir"

    def __init__(self, engine: SearchEngine, settings: IRSettings = IRSettings()) -> None:
        self.engine = engine
        self.settings = settings
        self.lang = engine.manifest["lang"]

    def retrieve(self, questions: Sequence[Question], depth: int, progress: bool = True) -> list[list[list[Hit]]]:
        """Top-``depth`` hits per option per question (computed once, aggregated many ways)."""
        queries = [option_queries(q, self.settings.query, self.lang) for q in questions]
        self.engine.fit_queries([text for group in queries for text in group])
        step = max(1, self.engine.query_batch // max(len(q.options) for q in questions)) if questions else 1
        out: list[list[list[Hit]]] = []
        with tqdm(total=len(queries), desc=f"retrieving ({self.engine.name})", unit="q", disable=not progress) as bar:
            for start in range(0, len(queries), step):
                groups = queries[start : start + step]
                hits = iter(self.engine.search([text for group in groups for text in group], depth))
                out.extend([next(hits) for _ in group] for group in groups)
                bar.update(len(groups))
        return out

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        s = self.settings
        hits = self.retrieve(questions, s.top_n, progress)
        return scores_from_hits(questions, hits, s.top_n, s.aggregate)


def scores_from_hits(
    questions: Sequence[Question], hits: list[list[list[Hit]]], top_n: int, how: str
) -> list[OptionScores]:
    """Turn retrieved hits into option scores for one (top-N, aggregate) choice."""
    out = []
    for q, per_option in zip(questions, hits):
        letters = list(q.options)
        out.append(
            OptionScores(
                q,
                {letter: aggregate(h, top_n, how) for letter, h in zip(letters, per_option)},
                {letter: h[:top_n] for letter, h in zip(letters, per_option)},
                matched=any(per_option),
            )
        )
    return out
