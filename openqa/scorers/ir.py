"""IR option scorers (the paper's IR-Custom and IR-ES): query = question + option, score = an
aggregate of the option's top-N paragraph scores, over any retrieval engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from openqa import arguments as arg
from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.languages import language
from openqa.progress import tqdm
from openqa.retrieval.base import Hit, QueryStatistics, SearchEngine
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.query import QUERY_MODES
from openqa.text.medical_filter import filter_question

#: How an option's top-N paragraph scores become one number.
AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "sum": lambda s: float(s.sum()),
    "max": lambda s: float(s.max(initial=0.0)),
    "decay": lambda s: float((s / np.arange(1, len(s) + 1)).sum()),
}



@dataclass(frozen=True)
class IRSettings:
    """Top-N, aggregate and query mode (``phrases`` falls back to ``filter`` without phrases);
    for the hybrid engine also the fusion (``rrf`` or ``weighted``) and the first engine's weight;
    for IR-Custom avgQL, the mean query length measured on the exam's dev queries of the query
    mode when tuning (None: each query's own length), so a question's scores are its own."""

    top_n: int = 10
    aggregate: str = "sum"
    query: str = "phrases"
    fusion: str = "rrf"
    weight: float = 0.5
    avg_ql: float | None = None

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise UsageError(f"unknown aggregate {self.aggregate!r}: choose one of {sorted(AGGREGATES)}")
        if self.query not in QUERY_MODES:
            raise UsageError(f"unknown query mode {self.query!r}: choose one of {QUERY_MODES}")
        if self.top_n < 1:
            raise UsageError(f"top-N must be at least 1, not {self.top_n}")
        if self.avg_ql is not None and not self.avg_ql > 0:
            raise OpenQAError(f"avgQL must be a positive length, not {self.avg_ql}")


def question_query(question: Question, mode: str, lang: str) -> str:
    """The question part of every option query an IR method asks, in query mode ``mode``.

    :param question: the ``Question``.
    :param mode: ``phrases`` (its MetaMap phrases, else as ``filter``), ``filter`` (its words without
        the medical filter's stop words), ``full`` (its whole text) or ``option`` (nothing).
    :param lang: the corpus language, ``en`` or ``zh``.
    :returns: the question part (empty for ``option``).
    :raises OpenQAError: on a question that is not a ``Question``, an unknown mode or language (one line)."""
    if not isinstance(question, Question):
        raise UsageError(f"question must be a Question, not {type(question).__name__}")
    arg.one_of("query mode", mode, QUERY_MODES)
    language(lang)
    if mode == "option":
        return ""
    if mode == "phrases" and question.metamap_phrases:
        return " ".join(question.metamap_phrases)
    if mode == "full":
        return question.question
    return filter_question(question.question, lang)


def option_queries(question: Question, mode: str, lang: str) -> list[str]:
    """The queries an IR method asks for a question, one per option in option order: the question
    part (``question_query``) and the option's text.

    :param question: the ``Question``.
    :param mode: the query mode of the question part (see ``question_query``).
    :param lang: the corpus language, ``en`` or ``zh``.
    :returns: one query per option.
    :raises OpenQAError: as ``question_query`` does."""
    stem = question_query(question, mode, lang)
    return [f"{stem} {text}".strip() for text in question.options.values()]


def aggregate(hits: list[Hit], top_n: int, how: str) -> float:
    """Aggregate the scores of the first ``top_n`` hits."""
    return AGGREGATES[how](np.array([h.score for h in hits[:top_n]], dtype=np.float64))


class IRScorer(OptionScorer):
    """Ranks options by the evidence an engine finds for question + option.

    Immutable: its settings and the engine's query-side ``params`` (IR-Custom's per-exam kQ, bQ)
    are fixed when it is made and passed to the engine on every search, so one scorer, and any
    number of scorers over one engine, serve many threads at once.
    """

    def __init__(self, engine: SearchEngine, settings: IRSettings = IRSettings(), params: Any = None) -> None:
        self.engine = engine
        self.settings = settings
        self.params = params
        self.lang = engine.manifest["lang"]

    def search(self, queries: Sequence[str], k: int, progress: Callable[[int], None] | None = None) -> list[list[Hit]]:
        """The engine's top-``k`` hits for each query text, with this scorer's query-side parameters."""
        return self.engine.search(queries, k, self.params, progress)

    def query_statistics(self, questions: Sequence[Question], query: str) -> QueryStatistics:
        """The engine's fixed query-side quantities (IR-Custom's avgQL) measured on the option
        queries of ``questions`` in query mode ``query`` (``openqa tune`` measures them on dev)."""
        return self.engine.query_statistics([t for q in questions for t in option_queries(q, query, self.lang)])

    def retrieve(
        self, questions: Sequence[Question], depth: int, progress: bool = True, query: str | None = None,
    ) -> list[list[list[Hit]]]:
        """Top-``depth`` hits per option per question (computed once, aggregated many ways), with the
        settings' query mode or ``query``; all the questions' option queries go to the engine in one
        call, and each query's hits are those it gets alone."""
        groups = [option_queries(q, query or self.settings.query, self.lang) for q in questions]
        texts = [text for group in groups for text in group]
        with tqdm(total=len(texts), desc=f"retrieving ({self.engine.name})", unit="query", disable=not progress) as bar:
            hits = iter(self.search(texts, depth, bar.update))
        return [[next(hits) for _ in group] for group in groups]

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
