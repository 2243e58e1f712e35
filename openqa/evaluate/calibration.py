"""How far to trust an answer: option probabilities calibrated on dev, and how well a method's
confidence ranks its answers.

A method's option scores become logits on its scorer's scale (``openqa.scorers.logits``), then
probabilities by a softmax of those logits divided by one temperature, fitted on the dev split of
the exam by maximum likelihood (``fit_temperature``). The same fit with several features and an L2
penalty weighs the parts of an ensemble (``fit_conditional_logit``): a temperature is the one-feature
case, its weight the inverse temperature.

``confidence_report`` measures how well the probabilities rank the answers of an evaluation: the
expected calibration error over ``ECE_BINS`` equal-width bins of the chosen option's probability, the
Brier score, the log-likelihood of the correct options, the area under the risk-coverage curve, and
the accuracy of the most confident 10, 20, 50 and 100% of the questions with 95% intervals. The
calibration error of a few hundred questions is not zero even for a perfectly calibrated method, so
the report also gives the error such a method would show with the same confidences
(``calibrated_ece``): a measured error inside that range is no evidence of miscalibration. Questions
of equal confidence are never ordered by their position in a file: a coverage that cuts through them
counts the expected share of their right answers (as a random order among them would).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence, cast

import numpy as np

from openqa.cancel import checkpoint
from openqa.data import DATASETS
from openqa.errors import OpenQAError, UsageError
from openqa.evaluate.metrics import wilson_interval
from openqa.scorers.base import OptionScores
from openqa.scorers.logits import known_scales, option_logits, scale_named

#: Equal-width bins of the chosen option's probability for the expected calibration error.
ECE_BINS = 10
#: The coverages (percent of questions, most confident first) whose accuracy a report gives.
COVERAGES = (10, 20, 50, 100)
#: Equal-width bins of dev confidence kept with a calibration (its reliability diagram; what a
#: confidence meant on dev, for a record made before the exact confidences were kept).
RELIABILITY_BINS = 20
#: Decimals of the dev confidences a calibration keeps, and of the confidence its sentence counts from.
CONFIDENCE_DECIMALS = 4
#: The inverse temperatures a fit may choose (temperatures from 1/1000 to 1000).
INVERSE_TEMPERATURE_BOUNDS = (1e-3, 1e3)
#: The least probability a log-likelihood takes (log 0 is minus infinity).
LIKELIHOOD_FLOOR = 1e-12
#: Fewer dev questions than this make a fit that is mostly noise (a 20-question fit chose a
#: temperature of 1,000): such a fit is kept, but ``tune`` and every record using it say so.
#: MedQA's smallest dev split holds 1,272 questions.
FEW_QUESTIONS = 100

#: What a temperature is fitted on unless a method says otherwise.
IN_SAMPLE = "the method's dev scores"
#: Folds of dev, drawn with ``CROSS_FIT_SEED``, over which weights fitted on dev are judged on
#: questions they were not fitted on (``cross_fitted_logits``).
CROSS_FIT_FOLDS = 5
CROSS_FIT_SEED = 0
#: Coverages at which a page's risk-coverage curve is drawn (``curves``).
CURVE_POINTS = 100
#: Seeded draws of right and wrong answers from which ``calibrated_ece`` gives the calibration error
#: a perfectly calibrated method would show on the same questions.
CALIBRATED_DRAWS = 1000
CALIBRATED_SEED = 0


def softmax(logits: np.ndarray) -> np.ndarray:
    """Probabilities of one question's logits."""
    shifted = np.exp(logits - logits.max())
    return cast(np.ndarray, shifted / shifted.sum())


def _padded(features: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Questions' (options x features) arrays stacked into (questions x most options x features),
    with a mask of the options that exist (4- and 5-option questions fit together)."""
    most = max(f.shape[0] for f in features)
    stacked = np.zeros((len(features), most, features[0].shape[1]))
    mask = np.zeros((len(features), most), dtype=bool)
    for i, f in enumerate(features):
        stacked[i, : f.shape[0]] = f
        mask[i, : f.shape[0]] = True
    return stacked, mask


def fit_conditional_logit(
    features: Sequence[np.ndarray], answers: Sequence[int], l2: float = 0.0,
    bounds: tuple[float | None, float | None] = (0.0, None),
) -> np.ndarray:
    """Weights ``w`` that maximize the conditional-logit likelihood of the correct options,
    ``sum_q log softmax(F_q w)[answer_q] - l2 / 2 * |w|^2``, each weight within ``bounds`` (by
    default non-negative: a feature may only favour the options it scores higher).

    ``features`` holds one (options x features) array per question, ``answers`` the index of each
    question's correct option. The objective is concave (its Hessian is minus the options'
    covariance of the features, minus the penalty), so a projected Newton method from all-ones
    weights (``projected_newton``) finds its maximum in a few steps, and the same data give the same
    weights on every run. Written with numpy alone: the core install needs no scipy.
    """
    if not features:
        raise OpenQAError("no questions to fit probabilities on")
    stacked, mask = _padded(features)
    rows = np.arange(len(features))
    answer = np.asarray(answers)
    chosen = stacked[rows, answer]  # (questions x features): the correct options' features

    def objective(w: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Minus the penalized log-likelihood, its gradient and its Hessian at ``w``."""
        logits = np.where(mask, stacked @ w, -np.inf)
        top = logits.max(axis=1, keepdims=True)
        exp = np.exp(logits - top)
        total = exp.sum(axis=1, keepdims=True)
        probs = exp / total
        loglik = (logits[rows, answer] - top[:, 0] - np.log(total[:, 0])).sum()
        mean = np.einsum("qk,qkf->qf", probs, stacked)
        grad = (chosen - mean).sum(axis=0)
        covariance = np.einsum("qk,qkf,qkg->fg", probs, stacked, stacked) - mean.T @ mean
        penalty = l2 * np.eye(len(w))
        return float(-loglik + 0.5 * l2 * w @ w), -grad + l2 * w, covariance + penalty

    low = -np.inf if bounds[0] is None else bounds[0]
    high = np.inf if bounds[1] is None else bounds[1]
    return projected_newton(objective, np.clip(np.ones(stacked.shape[2]), low, high), low, high)


#: When ``projected_newton`` stops: the step's size (relative) and the objective's change (relative).
NEWTON_TOLERANCE = 1e-10
NEWTON_STEPS = 200


def projected_newton(objective: Any, start: np.ndarray, low: float, high: float) -> np.ndarray:
    """The minimum of a convex ``objective`` (value, gradient, Hessian of ``w``) over the box
    ``low <= w <= high``: Newton steps over the weights not held at a bound by the gradient, each
    projected onto the box and halved until the objective falls enough (Armijo)."""
    w = start.astype(np.float64)
    value, grad, hessian = objective(w)
    for _ in range(NEWTON_STEPS):
        held = ((w <= low) & (grad > 0)) | ((w >= high) & (grad < 0))
        free = ~held
        if not free.any():
            break
        step = np.zeros_like(w)
        block = hessian[np.ix_(free, free)] + 1e-12 * np.eye(int(free.sum()))
        step[free] = -np.linalg.solve(block, grad[free])
        size = 1.0
        while True:
            moved = np.clip(w + size * step, low, high)
            new_value, new_grad, new_hessian = objective(moved)
            if new_value <= value + 1e-4 * grad @ (moved - w) or size < 1e-12:
                break
            size /= 2
        done = (np.abs(moved - w).max() <= NEWTON_TOLERANCE * (1 + np.abs(w).max())
                or abs(value - new_value) <= NEWTON_TOLERANCE * (1 + abs(value)))
        w, value, grad, hessian = moved, new_value, new_grad, new_hessian
        if done:
            break
    return w


def folds(n: int, k: int = CROSS_FIT_FOLDS, seed: int = CROSS_FIT_SEED) -> list[np.ndarray]:
    """The indices of ``n`` questions dealt into ``min(k, n)`` folds in a seeded random order (the
    same folds on every run)."""
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(order[f::min(k, n)]) for f in range(min(k, n))]


def cross_fitted_logits(features: Sequence[np.ndarray], answers: Sequence[int], l2: float,
                        k: int = CROSS_FIT_FOLDS, seed: int = CROSS_FIT_SEED) -> list[np.ndarray]:
    """Each question's logits ``F_q w`` under weights fitted (``fit_conditional_logit``) on the other
    folds of ``folds(len(features), k, seed)``: what the fit gives questions it has not seen."""
    if len(features) < 2:
        raise OpenQAError("cross-fitting needs at least two questions")
    out: list[np.ndarray] = [np.empty(0)] * len(features)
    for held in folds(len(features), k, seed):
        kept = np.setdiff1d(np.arange(len(features)), held)
        w = fit_conditional_logit([features[i] for i in kept], [answers[i] for i in kept], l2=l2)
        for i in held:
            out[i] = np.asarray(features[i]) @ w
    return out


def fit_temperature(logits: Sequence[np.ndarray], answers: Sequence[int]) -> float:
    """The temperature ``T`` maximizing the likelihood of the correct options under
    ``softmax(logits / T)`` (bounded by ``INVERSE_TEMPERATURE_BOUNDS``)."""
    weight = fit_conditional_logit([np.asarray(z)[:, None] for z in logits], answers, bounds=INVERSE_TEMPERATURE_BOUNDS)
    return float(1.0 / weight[0])


def dataset_label(dataset: str) -> str:
    """How a sentence names the questions a calibration was fitted on: a named dataset's dev split,
    else the label it was given (a user's question file, by name and digest)."""
    return f"MedQA {dataset} dev" if dataset in DATASETS else dataset


@dataclass(frozen=True)
class Calibration:
    """A method's temperature over its logits (on ``scale``), fitted on ``dataset`` dev (or the
    questions ``dataset`` names: ``dataset_label``), with what
    the fit saw: ``bins`` counts the dev answers and the right ones in ``RELIABILITY_BINS`` equal-width
    bins of confidence, ``chance`` the mean of 1/options, ``settings`` the method's settings when
    fitted, ``fitted_on`` which dev logits the temperature was fitted on (a method whose weights were
    themselves fitted on dev is calibrated on held-out folds); ``source`` says where it was read from.

    ``confidences`` holds every dev answer's confidence (to ``CONFIDENCE_DECIMALS`` decimals,
    ascending) and ``correct`` whether each was right ("1"/"0", same order), so that what a
    confidence meant on dev is an exact count (``meaning``); ``options`` counts the dev questions by
    their number of options."""

    temperature: float
    scale: str
    dataset: str
    n: int
    bins: tuple[tuple[int, int], ...]
    chance: float
    settings: dict[str, Any] = field(default_factory=dict)
    fitted_on: str = IN_SAMPLE
    source: str = ""
    confidences: tuple[float, ...] = ()
    correct: str = ""
    options: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse what cannot be a calibration; a scale's former name (a record written under it)
        is kept under its name now."""
        scale = scale_named(self.scale)
        if scale is None:
            raise UsageError(f"unknown score scale {self.scale!r}: choose one of {known_scales()}")
        object.__setattr__(self, "scale", scale)
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise OpenQAError(f"a calibration's temperature must be a positive number, not {self.temperature}")
        if len(self.bins) != RELIABILITY_BINS:
            raise OpenQAError(f"a calibration keeps {RELIABILITY_BINS} bins of dev confidence, not {len(self.bins)}")
        if (len(self.correct) != len(self.confidences) or set(self.correct) - {"0", "1"}
                or list(self.confidences) != sorted(self.confidences)):
            raise OpenQAError("a calibration's dev confidences must be ascending, each with a 0 or 1 saying whether it was right")

    @classmethod
    def fit(cls, results: Sequence[OptionScores], scale: str, dataset: str, settings: dict[str, Any],
            fitted_on: str = IN_SAMPLE) -> "Calibration":
        """The temperature that fits ``results`` (a method's dev scores, or ``fitted_on`` says which
        ones) best, and its dev bins."""
        scored = [r for r in results if r.question.answer_idx in r.scores]
        if not scored:
            raise OpenQAError("no dev question with a known answer to fit probabilities on")
        logits = [option_logits(r, scale) for r in scored]
        answers = [list(r.scores).index(r.question.answer_idx) for r in scored]
        temperature = fit_temperature(logits, answers)
        fitted = cls(temperature, scale, dataset, len(scored), ((0, 0),) * RELIABILITY_BINS,
                     float(np.mean([1 / len(r.scores) for r in scored])), settings, fitted_on)
        confidence, correct = chosen_confidence(scored, [fitted.probabilities(r) for r in scored])
        binned = _bin(confidence, RELIABILITY_BINS)
        answered = np.bincount(binned, minlength=RELIABILITY_BINS)
        right = np.bincount(binned, correct.astype(float), RELIABILITY_BINS)
        rounded = np.round(confidence, CONFIDENCE_DECIMALS)
        order = np.lexsort((correct, rounded))
        sizes = np.bincount([len(r.scores) for r in scored])
        return replace(fitted, bins=tuple((int(a), int(r)) for a, r in zip(answered, right)),
                       confidences=tuple(map(float, rounded[order])), correct="".join("1" if c else "0" for c in correct[order]),
                       options={k: int(v) for k, v in enumerate(sizes) if v})

    def probabilities(self, result: OptionScores) -> dict[str, float]:
        """Each option's probability: the softmax of its logits divided by the temperature."""
        return dict(zip(result.scores, map(float, softmax(option_logits(result, self.scale) / self.temperature))))

    def meaning(self, confidence: float, options: int) -> str:
        """What ``confidence`` meant on dev, for a question of ``options`` options: how many dev
        answers were at least this confident (to ``CONFIDENCE_DECIMALS`` decimals) and how many of
        them were right, exactly counted, against this question's chance (1 / options); and, when
        the dev questions had another number of options, that the temperature was fitted on those.
        (A record without the dev confidences counts from the floor of the confidence's dev bin and says so.)"""
        where = dataset_label(self.dataset)
        if self.confidences:
            at = round(confidence, CONFIDENCE_DECIMALS)
            first = bisect_left(self.confidences, at)
            answers, right = len(self.confidences) - first, self.correct.count("1", first)
            these = "answers this confident or more"
        else:
            floor = _bin(confidence, RELIABILITY_BINS)
            counted = self.bins[floor:]
            answers, right = sum(b[0] for b in counted), sum(b[1] for b in counted)
            these = f"answers of confidence {floor / RELIABILITY_BINS:.2f} or more"
        said = (f"on {where}, {these} were right {100 * right / answers:.0f}% of the time ({right} of {answers})"
                if answers else f"no answer on {where} was this confident")
        said += f"; chance is {100 / options:.0f}%"
        if self.options and options not in self.options:
            fitted = " and ".join(f"{k}-option" for k in sorted(self.options))
            said += f" (calibrated on {fitted} questions; this one has {options} options)"
        return said

    def to_dict(self) -> dict[str, Any]:
        """The record ``openqa tune`` writes (the source is where it is read from, not part of it)."""
        record = asdict(self)
        record.pop("source")
        record["bins"] = [list(b) for b in self.bins]
        record["confidences"] = list(self.confidences)
        record["options"] = {str(k): v for k, v in self.options.items()}
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = "") -> "Calibration":
        """A calibration from its record; refused in one line when a field is missing or wrong."""
        try:
            return cls(float(record["temperature"]), record["scale"], record["dataset"], int(record["n"]),
                       tuple((int(a), int(b)) for a, b in record["bins"]), float(record["chance"]),
                       dict(record.get("settings", {})), str(record.get("fitted_on", IN_SAMPLE)), source,
                       tuple(float(c) for c in record.get("confidences", ())), str(record.get("correct", "")),
                       {int(k): int(v) for k, v in record.get("options", {}).items()})
        except (KeyError, TypeError, ValueError) as exc:
            raise OpenQAError(f"unreadable calibration record ({type(exc).__name__}: {exc})") from None

    def describe(self) -> str:
        """One line: which temperature, fitted where."""
        held = "" if self.fitted_on == IN_SAMPLE else f", {self.fitted_on}"
        few = f", few: under {FEW_QUESTIONS}, mostly noise" if self.n < FEW_QUESTIONS else ""
        return (f"temperature {self.temperature:.3g} over {self.scale} scores, fitted on {dataset_label(self.dataset)} "
                f"({self.n} questions{held}{few})")


def _bin(confidence: Any, bins: int) -> Any:
    """The equal-width bin of [0, 1] that ``confidence`` (a number or an array of them) falls in
    (1.0 in the last)."""
    return np.minimum((np.asarray(confidence) * bins).astype(int), bins - 1)


def uncalibrated(scale: str) -> "Calibration":
    """Temperature 1 over ``scale``: what a method's probabilities are when no calibration is found."""
    return Calibration(1.0, scale, "none", 0, ((0, 0),) * RELIABILITY_BINS, 0.0, {}, source="not calibrated: temperature 1")


def chosen_confidence(results: Sequence[OptionScores], probabilities: Sequence[dict[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Each question's confidence (the probability of its prediction; 0 when it abstained) and whether it was right."""
    confidence = np.array([p[cast(str, r.prediction())] if r.prediction() is not None else 0.0 for r, p in zip(results, probabilities)])
    correct = np.array([r.prediction() is not None and r.prediction() == r.question.answer_idx for r in results])
    return confidence, correct


def _ranked_correct(confidence: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Expected right answers among the k most confident questions, for k = 1..n: tied confidences
    share their right answers evenly (the mean over every order of the tied questions)."""
    order = np.argsort(-confidence, kind="stable")
    c, right = confidence[order], correct[order].astype(float)
    out = np.empty(len(c))
    start, done = 0, 0.0
    while start < len(c):
        end = start + 1
        while end < len(c) and c[end] == c[start]:
            end += 1
        group = right[start:end].sum()
        size = end - start
        out[start:end] = done + group * np.arange(1, size + 1) / size
        done += group
        start = end
    return out


def calibration_error(confidence: np.ndarray, correct: np.ndarray) -> float:
    """The expected calibration error over ``ECE_BINS`` equal-width bins of confidence: each bin's
    |accuracy - mean confidence| weighted by its share of the questions, which is
    |right answers - summed confidence| / n."""
    binned = _bin(confidence, ECE_BINS)
    gap = np.bincount(binned, correct.astype(float), ECE_BINS) - np.bincount(binned, confidence, ECE_BINS)
    return float(np.abs(gap).sum() / len(confidence))


def calibrated_ece(confidence: np.ndarray, draws: int = CALIBRATED_DRAWS, seed: int = CALIBRATED_SEED) -> dict[str, Any]:
    """The calibration error a perfectly calibrated method with these ``confidence`` values would
    show on as many questions: each answer drawn right with probability its confidence, ``draws``
    seeded times; the median and the central 95% of those errors. Sampling noise alone gives an
    error of a few hundredths on a few hundred questions, which a target must be read against. The
    confidences are drawn for in sorted order, so the range never depends on the questions' order."""
    confidence = np.sort(np.asarray(confidence, dtype=np.float64))
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(draws):
        checkpoint()  # a server's comparison stops here once it is no longer wanted
        errors.append(calibration_error(confidence, rng.random(len(confidence)) < confidence))
    low, median, high = np.percentile(errors, [2.5, 50, 97.5])
    return {"median": round(float(median), 4), "ci95": [round(float(low), 4), round(float(high), 4)],
            "definition": f"the ECE of a perfectly calibrated method with the same confidences: each answer right "
                          f"with probability its confidence, {draws} draws (seed {seed}); median and central 95%"}


def risk_coverage(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coverage (share of questions answered, most confident first) and risk (share of those wrong)."""
    n = len(confidence)
    k = np.arange(1, n + 1)
    return k / n, 1 - _ranked_correct(confidence, correct) / k


def curves(confidence: np.ndarray, correct: np.ndarray, points: int = CURVE_POINTS) -> dict[str, Any]:
    """What a page draws of a run's confidence: the accuracy of the answered at ``points`` evenly
    spaced coverages (most confident first, ties sharing their answers as in ``risk_coverage``), and
    the reliability diagram over ``ECE_BINS`` equal-width bins of confidence (each bin's questions,
    mean confidence and accuracy; empty bins left out)."""
    n = len(confidence)
    if n == 0:
        return {"n": 0, "coverage": [], "reliability": [], "ece": None}
    ranked = _ranked_correct(confidence, correct)
    cuts = sorted({max(1, math.ceil(n * i / points)) for i in range(1, points + 1)})
    coverage = [[round(100 * k / n, 2), round(100 * float(ranked[k - 1]) / k, 2)] for k in cuts]
    binned = _bin(confidence, ECE_BINS)
    count = np.bincount(binned, minlength=ECE_BINS)
    summed = np.bincount(binned, confidence, ECE_BINS)
    right = np.bincount(binned, correct.astype(float), ECE_BINS)
    reliability = [{"low": b / ECE_BINS, "high": (b + 1) / ECE_BINS, "n": int(count[b]),
                    "confidence": round(100 * float(summed[b] / count[b]), 2), "accuracy": round(100 * float(right[b] / count[b]), 2)}
                   for b in range(ECE_BINS) if count[b]]
    return {"n": n, "coverage": coverage, "reliability": reliability, "ece": round(calibration_error(confidence, correct), 4)}


def confidence_report(results: Sequence[OptionScores], probabilities: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Calibration error, Brier score, log-likelihood, area under the risk-coverage curve and the
    accuracy at each of ``COVERAGES`` (see the module's docstring for each definition)."""
    n = len(results)
    if n == 0:
        return {}
    confidence, correct = chosen_confidence(results, probabilities)
    ece = calibration_error(confidence, correct)
    brier = np.mean([sum((p.get(k, 0.0) - (k == r.question.answer_idx)) ** 2 for k in r.scores) for r, p in zip(results, probabilities)])
    loglik = np.mean([math.log(max(p.get(r.question.answer_idx, 0.0), LIKELIHOOD_FLOOR)) for r, p in zip(results, probabilities)])
    _, risk = risk_coverage(confidence, correct)
    ranked = _ranked_correct(confidence, correct)
    at = {}
    for share in COVERAGES:
        m = max(1, math.ceil(share * n / 100))
        right = float(ranked[m - 1])
        at[str(share)] = {"n": m, "accuracy": round(100 * right / m, 2), "ci95": list(wilson_interval(right, m))}
    return {
        "ece": round(float(ece), 4),
        "ece_binning": f"{ECE_BINS} equal-width bins of the chosen option's probability, weighted by their questions",
        "ece_if_calibrated": calibrated_ece(confidence),
        "brier": round(float(brier), 4),
        "brier_definition": "mean over questions of the squared distance between the option probabilities and the one-hot answer",
        "log_likelihood": round(float(loglik), 4),
        "aurc": round(float(risk.mean()), 4),
        "aurc_definition": "mean risk (share wrong) over coverages 1/n..n/n, most confident first; ties share their answers evenly",
        "mean_confidence": round(float(confidence.mean()), 4),
        "accuracy_at_coverage": at,
    }


def risk_coverage_png(curves: Mapping[str, tuple[Sequence[OptionScores], Sequence[dict[str, float]]]], title: str) -> bytes:
    """A PNG of the risk-coverage curve of each named method's results (one line each), with chance."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for name, (results, probabilities) in curves.items():
        confidence, correct = chosen_confidence(results, probabilities)
        coverage, risk = risk_coverage(confidence, correct)
        axis.plot(100 * coverage, 100 * (1 - risk), label=f"{name} (AURC {risk.mean():.3f})")
    first = next(iter(curves.values()))[0]
    chance = 100 * float(np.mean([1 / len(r.scores) for r in first])) if first else 0.0
    axis.axhline(chance, color="grey", linestyle=":", label=f"chance ({chance:.0f}%)")
    axis.set_xlabel("coverage: questions answered, most confident first (%)")
    axis.set_ylabel("accuracy of the answered (%)")
    axis.set_xlim(0, 100)
    axis.set_title(title)
    axis.legend(fontsize=7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()
