"""Option scores as logits: the common scale on which a method's scores become probabilities.

Each scorer's scores live on a scale of their own (a BM25 sum of 1925 against 1893, a PMI of 2.1, a
letter probability of 0.4, a reader's logit), so they are first put on a scale where a softmax
means something, chosen by the scorer (``OptionScorer.scale``):

- ``standardized``: within-question z-scores (mean 0, standard deviation 1 over the options), for
  evidence scores whose size depends on the question (lexical and dense retrieval, PMI, fusions);
- ``log-probability``: the natural log of scores that already are probabilities (an LLM's letter
  probabilities or vote shares), floored at ``PROBABILITY_FLOOR``;
- ``logits``: scores that already are logits (a trained reader's, an ensemble's).

A calibration then divides these logits by one temperature fitted on dev
(``openqa.evaluate.calibration``); an ensemble weighs several methods' logits.
"""

from __future__ import annotations

from typing import Callable, cast

import numpy as np

from openqa.scorers.base import OptionScores

#: The least probability a ``log-probability`` score is taken as (log 0 is minus infinity).
PROBABILITY_FLOOR = 1e-6
#: How far below the worst option with evidence an option without any (a non-finite score) lies, in
#: standard deviations of the others.
NO_EVIDENCE_GAP = 1.0


def _standardized(scores: np.ndarray) -> np.ndarray:
    """Within-question z-scores; an option without evidence (non-finite) lies ``NO_EVIDENCE_GAP``
    below the worst option with some; options that all score alike (or none with evidence) are 0."""
    finite = np.isfinite(scores)
    out = np.zeros_like(scores)
    if finite.sum() < 2:
        out[~finite] = -NO_EVIDENCE_GAP if finite.any() else 0.0
        return out
    values = scores[finite]
    spread = values.std()
    if spread <= 0:
        out[~finite] = -NO_EVIDENCE_GAP
        return out
    out[finite] = (values - values.mean()) / spread
    out[~finite] = out[finite].min() - NO_EVIDENCE_GAP
    return out


def _log_probability(scores: np.ndarray) -> np.ndarray:
    """Natural logs of probabilities (non-finite ones, and those under the floor, at the floor)."""
    clean = np.where(np.isfinite(scores), scores, 0.0)
    return cast(np.ndarray, np.log(np.clip(clean, PROBABILITY_FLOOR, None)))


def _logits(scores: np.ndarray) -> np.ndarray:
    """Scores that already are logits (a non-finite one at the lowest finite score of the question)."""
    finite = np.isfinite(scores)
    return np.where(finite, scores, scores[finite].min() if finite.any() else 0.0)


#: Each scale by name, turning one question's scores (in option order) into logits.
SCALES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "standardized": _standardized,
    "log-probability": _log_probability,
    "logits": _logits,
}


def option_logits(result: OptionScores, scale: str) -> np.ndarray:
    """One question's option scores on ``scale``, in the order of ``result.scores`` (its options')."""
    return SCALES[scale](np.array(list(result.scores.values()), dtype=np.float64))
