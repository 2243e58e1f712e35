"""Hybrid option scoring: IR-Custom and dense option scores fused per question.

Scores of different engines live on different scales, and rank-based fusion of paragraph lists
erases how much better one option's evidence is than another's; so the fusion is done on the
option scores of each question: ``weighted`` sums min-max normalised option scores (weight on the
first scorer), ``rrf`` sums 1 / (60 + rank) of each option in each scorer's ranking.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from openqa.data import Question
from openqa.retrieval.hybrid import RRF_K, Fusion
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ir import IRScorer


def _minmax(values: np.ndarray) -> np.ndarray:
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


def _rrf(values: np.ndarray) -> np.ndarray:
    ranks = np.argsort(np.argsort(-values, kind="stable"), kind="stable") + 1
    return 1.0 / (RRF_K + ranks)


def fuse_options(first: OptionScores, second: OptionScores, fusion: Fusion) -> OptionScores:
    """One question's fused option scores; evidence from the first scorer."""
    letters = list(first.scores)
    a = np.array([first.scores[k] for k in letters], dtype=np.float64)
    b = np.array([second.scores[k] for k in letters], dtype=np.float64)
    if fusion.kind == "rrf":
        fused = _rrf(a) + _rrf(b)
    else:
        fused = fusion.weight * _minmax(a) + (1 - fusion.weight) * _minmax(b)
    return OptionScores(first.question, dict(zip(letters, map(float, fused))), first.evidence,
                        matched=first.matched or second.matched)


class HybridScorer(OptionScorer):
    """Two IR scorers (each with its own dev-tuned settings) fused per question."""

    def __init__(self, first: IRScorer, second: IRScorer, fusion: Fusion = Fusion()) -> None:
        self.first, self.second = first, second
        self.fusion = fusion
        self.settings = replace(first.settings, fusion=fusion.kind, weight=fusion.weight)

    def part_scores(self, questions: Sequence[Question], progress: bool = True) -> tuple[list[OptionScores], list[OptionScores]]:
        """Each part's option scores, computed once (tuning fuses them many ways)."""
        return self.first.score(questions, progress), self.second.score(questions, progress)

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        first, second = self.part_scores(questions, progress)
        return [fuse_options(a, b, self.fusion) for a, b in zip(first, second)]
