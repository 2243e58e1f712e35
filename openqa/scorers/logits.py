"""Option scores as logits: the common scale on which a method's scores become probabilities.

Each scorer's scores live on a scale of their own (a BM25 sum of 1925 against 1893, a PMI of 2.1, a
letter probability of 0.4, a reader's logit), so they are first put on a scale where a softmax
means something, chosen by the scorer (``OptionScorer.scale``):

- ``standardized``: evidence scores whose size depends on the question (lexical and dense
  retrieval, PMI, fusions), made within-question z-scores (mean 0, standard deviation 1 over the
  options; scores that already are z-scores stay as they are);
- ``probability``: scores that are probabilities (an LLM's letter probabilities or vote shares),
  made logits by their natural log, floored at ``PROBABILITY_FLOOR``;
- ``logits``: scores that already are logits (a trained reader's, an ensemble's).

Files name the scale of their scores (a predictions file's rows, a calibration record). A name a
scale was written under before (``FORMER_NAMES``: ``log-probability``, which named what
probabilities become, not what the file's numbers are) still reads as the scale it names now, so
an older file gives the same results; any other name is refused.

A calibration then divides these logits by one temperature fitted on dev
(``openqa.evaluate.calibration``); an ensemble weighs several methods' logits.
"""

from __future__ import annotations

from typing import Callable, cast

import numpy as np

from openqa.scorers.base import OptionScores

#: The least probability a ``probability`` score is taken as (log 0 is minus infinity).
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


def _probability(scores: np.ndarray) -> np.ndarray:
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
    "probability": _probability,
    "logits": _logits,
}
#: Names a scale was written under before, each read as the scale it names now.
FORMER_NAMES = {"log-probability": "probability"}


def scale_named(name: object) -> str | None:
    """The scale ``name`` names now (itself, or what a former name became); None for no known scale."""
    if not isinstance(name, str):
        return None
    name = FORMER_NAMES.get(name, name)
    return name if name in SCALES else None


def known_scales() -> str:
    """The scale names, for a message that refuses another (the former names too, which still read)."""
    return f"{', '.join(SCALES)} (or the former {', '.join(FORMER_NAMES)})"


def option_logits(result: OptionScores, scale: str) -> np.ndarray:
    """One question's option scores on ``scale``, in the order of ``result.scores`` (its options')."""
    return SCALES[scale](np.array(list(result.scores.values()), dtype=np.float64))
