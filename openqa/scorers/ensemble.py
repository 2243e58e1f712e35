"""An ensemble of option scorers: a conditional-logit combination of their option logits.

Each part's option scores are put on its own logit scale (``openqa.scorers.logits``: evidence scores
standardized within the question, an LLM's letter probabilities as log-probabilities), and an
option's ensemble score is the weighted sum of its parts' logits, with weights fitted on dev by
``openqa.evaluate.calibration.fit_conditional_logit``. The sum is itself a logit: its softmax is the
ensemble's probability of each option. An ensemble of one part with a positive weight ranks the
options exactly as the part does.

A part that gives letter probabilities (an LLM's) also prefers some letters whatever they say (the
1.5B model of the records favours B: ``eval/results/studies/llm-letter-prior-*-dev.json``). Its *letter
prior* (its mean probability of each letter over the dev questions, ``letter_prior``) is divided out
of its probabilities before they are weighed, after PriDe (Zheng et al. 2024, "Large Language Models
Are Not Robust Multiple Choice Selectors"), which estimates the prior differently. The correction
aims at a model that uses every position alike, not at the dev answers' positions, so it favours
none. The prior is fitted on dev with the weights and kept with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.logits import option_logits

if TYPE_CHECKING:
    from openqa.retrieval.base import Hit
    from openqa.scorers.bank import QuestionBank

#: Details of a part that an ensemble's answer shows too (the nearest solved questions of a bank part).
SHOWN_DETAILS = ("solved_questions",)
#: The scale whose parts' letter prior is divided out (letter probabilities).
LETTER_SCALE = "probability"


def letter_prior(results: Sequence[OptionScores], scale: str) -> dict[str, float]:
    """A letter-probability part's mean probability of each letter over ``results`` (dev questions),
    each question's probabilities normalised first; empty for a part on another scale."""
    if scale != LETTER_SCALE:
        return {}
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for result in results:
        logits = option_logits(result, scale)
        probabilities = np.exp(logits - logits.max())
        for letter, p in zip(result.scores, probabilities / probabilities.sum()):
            sums[letter] = sums.get(letter, 0.0) + float(p)
            counts[letter] = counts.get(letter, 0) + 1
    return {letter: round(sums[letter] / counts[letter], 6) for letter in sorted(sums)}


def letter_priors(parts: dict[str, OptionScorer], scored: dict[str, list[OptionScores]]) -> dict[str, dict[str, float]]:
    """The letter prior of each letter-probability part among ``parts``, over its ``scored`` dev questions."""
    return {label: prior for label, scorer in parts.items() if (prior := letter_prior(scored[label], scorer.scale))}


def _without_prior(logits: np.ndarray, letters: Sequence[str], prior: dict[str, float]) -> np.ndarray:
    """Log-probabilities with ``prior`` divided out; unchanged when a letter has no prior (a question
    with more options than the dev questions had)."""
    if not prior or any(letter not in prior for letter in letters):
        return logits
    return logits - np.log([prior[letter] for letter in letters])


def part_logits(parts: Sequence[OptionScores], scales: Sequence[str],
                priors: Sequence[dict[str, float]] | None = None) -> np.ndarray:
    """One question's (options x parts) logits: each part's option scores on its own scale, with
    its letter prior (if any) divided out."""
    priors = priors or [{}] * len(parts)
    return np.stack([_without_prior(option_logits(result, scale), list(result.scores), prior)
                     for result, scale, prior in zip(parts, scales, priors)], axis=1)


def logit_features(scored: dict[str, list[OptionScores]], scales: Sequence[str], priors: Sequence[dict[str, float]],
                   ) -> tuple[list[np.ndarray], list[int]]:
    """Each question's (options x parts) logits (``part_logits`` of its parts' ``scored`` option
    scores on their ``scales``, ``priors`` divided out), and the index of its correct option:
    what an ensemble's weights are fitted on. Questions whose answer is not among the options are
    left out."""
    features, answers = [], []
    for per_part in zip(*scored.values()):
        letters = list(per_part[0].scores)
        if per_part[0].question.answer_idx in letters:
            features.append(part_logits(per_part, scales, priors))
            answers.append(letters.index(per_part[0].question.answer_idx))
    return features, answers


class EnsembleScorer(OptionScorer):
    """Named part scorers, each scored once per question, combined with fixed ``weights`` (and the
    letter prior of each letter-probability part, by label, divided out first)."""

    #: Its scores are already logits (weighted sums of the parts').
    scale = "logits"

    def __init__(self, parts: dict[str, OptionScorer], weights: Sequence[float],
                 priors: dict[str, dict[str, float]] | None = None) -> None:
        if len(parts) != len(weights):
            raise OpenQAError(f"an ensemble of {len(parts)} parts needs {len(parts)} weights, not {len(weights)}")
        self.parts = dict(parts)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.priors = {label: dict(prior) for label, prior in (priors or {}).items() if prior}
        if unknown := set(self.priors) - set(self.parts):
            raise OpenQAError(f"a letter prior for {sorted(unknown)[0]!r}, which is not a part of the ensemble")

    def logits(self, per_part: Sequence[OptionScores]) -> np.ndarray:
        """One question's (options x parts) logits, as the weights are fitted over and applied to."""
        return part_logits(per_part, [s.scale for s in self.parts.values()],
                           [self.priors.get(label, {}) for label in self.parts])

    def banks(self) -> list[QuestionBank]:
        return [bank for scorer in self.parts.values() for bank in scorer.banks()]

    def part_scores(self, questions: Sequence[Question], progress: bool = True) -> dict[str, list[OptionScores]]:
        """Every part's option scores for ``questions`` (each part scored once)."""
        return {name: scorer.score(questions, progress) for name, scorer in self.parts.items()}

    def combine(self, scored: dict[str, list[OptionScores]]) -> list[OptionScores]:
        """The ensemble's option scores from its parts' (``part_scores``); the evidence shown is the
        first part's that has some, and each question keeps its parts' logits in ``details``."""
        out = []
        for per_part in zip(*scored.values()):
            first = per_part[0]
            logits = self.logits(per_part)
            combined = logits @ self.weights
            evidence: dict[str, list[Hit]] = next((r.evidence for r in per_part if r.evidence), {})
            details: dict[str, Any] = {"part_logits": {name: [round(float(v), 4) for v in logits[:, i]]
                                                       for i, name in enumerate(self.parts)}}
            for r in per_part:  # what a part shows beside the textbooks (the nearest solved questions)
                details.update({key: r.details[key] for key in SHOWN_DETAILS if key in r.details})
            out.append(OptionScores(first.question, dict(zip(first.scores, map(float, combined))), evidence,
                                    matched=any(r.matched for r in per_part), details=details))
        return out

    def score(self, questions: Sequence[Question], progress: bool = True) -> list[OptionScores]:
        return self.combine(self.part_scores(questions, progress))

    def score_with_parts(self, questions: Sequence[Question], progress: bool = True,
                         ) -> tuple[list[OptionScores], dict[str, list[OptionScores]]]:
        scored = self.part_scores(questions, progress)
        return self.combine(scored), scored

    def report(self, results: Sequence[OptionScores]) -> dict[str, Any]:
        """What its parts add to a record, over the ensemble's own answers (a bank part's disclosure)."""
        out: dict[str, Any] = {}
        for part in self.parts.values():
            out.update(part.report_as_part(results))
        return out
