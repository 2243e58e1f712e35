"""An ensemble of option scorers: a conditional-logit combination of their option logits.

Each part's option scores are put on its own logit scale (``openqa.scorers.logits``: evidence scores
standardized within the question, an LLM's letter probabilities as log-probabilities), and an
option's ensemble score is the weighted sum of its parts' logits, with weights fitted on dev by
``openqa.evaluate.calibration.fit_conditional_logit``. The sum is itself a logit: its softmax is the
ensemble's probability of each option. An ensemble of one part with a positive weight ranks the
options exactly as the part does.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.logits import option_logits


def part_logits(parts: Sequence[OptionScores], scales: Sequence[str]) -> np.ndarray:
    """One question's (options x parts) logits: each part's option scores on its own scale."""
    return np.stack([option_logits(result, scale) for result, scale in zip(parts, scales)], axis=1)


class EnsembleScorer(OptionScorer):
    """Named part scorers, each scored once per question, combined with fixed ``weights``."""

    #: Its scores are already logits (weighted sums of the parts').
    scale = "logits"

    def __init__(self, parts: dict[str, OptionScorer], weights: Sequence[float]) -> None:
        if len(parts) != len(weights):
            raise OpenQAError(f"an ensemble of {len(parts)} parts needs {len(parts)} weights, not {len(weights)}")
        self.parts = dict(parts)
        self.weights = np.asarray(weights, dtype=np.float64)

    def part_scores(self, questions: Sequence[Question], progress: bool = True) -> dict[str, list[OptionScores]]:
        """Every part's option scores for ``questions`` (each part scored once)."""
        return {name: scorer.score(questions, progress) for name, scorer in self.parts.items()}

    def combine(self, scored: dict[str, list[OptionScores]]) -> list[OptionScores]:
        """The ensemble's option scores from its parts' (``part_scores``); the evidence shown is the
        first part's that has some, and each question keeps its parts' logits in ``details``."""
        scales = [scorer.scale for scorer in self.parts.values()]
        out = []
        for per_part in zip(*scored.values()):
            first = per_part[0]
            logits = part_logits(per_part, scales)
            combined = logits @ self.weights
            evidence = next((r.evidence for r in per_part if r.evidence), {})
            details = {"part_logits": {name: [round(float(v), 4) for v in logits[:, i]] for i, name in enumerate(self.parts)}}
            out.append(OptionScores(first.question, dict(zip(first.scores, map(float, combined))), evidence,
                                    matched=any(r.matched for r in per_part), details=details))
        return out

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        return self.combine(self.part_scores(questions, progress))

    def score_with_parts(self, questions: Sequence[Question], progress: bool = True,
                         ) -> tuple[list[OptionScores], dict[str, list[OptionScores]]]:
        scored = self.part_scores(questions, progress)
        return self.combine(scored), scored
