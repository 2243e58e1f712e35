"""Scoring many questions at once, and judging an ensemble's parts on them.

- ``ScoredQuestions``: a method's option scores of a list of questions (``Solver.score_all``, or one
  part of ``score_parts``), with the scale on which they become logits: their accuracy, an LLM
  part's letter prior, their logits, and the temperature that calibrates them.
- ``score_parts``: parts of an ensemble (methods, ``METHOD:setting=value``, or predictions files)
  opened for an exam as ``openqa tune --method ensemble`` opens them, each scored once on the same
  questions, to be judged together in any combination.
- ``CrossValidation``: how a set of scored parts does as an ensemble on questions its weights were
  not fitted on (``HeldOut``): how the default parts were chosen (``scripts/studies/ensemble_parts.py``).
- ``exam_bank``: the solved questions the bank method votes from for an exam (a ``QuestionBank``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from openqa import arguments as arg
from openqa.api.checks import bank_files
from openqa.api.workspace import Workspace
from openqa.errors import UsageError
from openqa.progress import shown

if TYPE_CHECKING:
    import numpy as np

    from openqa.data import Question
    from openqa.scorers.bank import QuestionBank
    from openqa.scorers.base import OptionScores

#: The least probability a held-out log-likelihood counts (log 0 is minus infinity).
LIKELIHOOD_FLOOR = 1e-12
#: Probabilities this close to the best count as tied for it (a tie counts its expected share right).
TIED = 1e-12


@dataclass(frozen=True)
class ScoredQuestions:
    """A method's option scores of a list of questions (``results``: one ``OptionScores`` a question,
    in order, with its evidence and details) and the ``scale`` on which they become logits
    (``standardized`` evidence scores, an LLM's letter ``probability``, ``logits``).

    :param results: one ``OptionScores`` a question.
    :param scale: the scores' scale (``openqa.scorers.logits.SCALES``; a former name reads as the scale it names now).
    :raises OpenQAError: on results that are not ``OptionScores`` or an unknown scale (one line)."""

    results: list[OptionScores]
    scale: str = "standardized"

    def __post_init__(self) -> None:
        from openqa.scorers.base import OptionScores
        from openqa.scorers.logits import known_scales, scale_named

        if not isinstance(self.results, (list, tuple)) or not all(isinstance(r, OptionScores) for r in self.results):
            raise UsageError("results must be a list of OptionScores (one a question)")
        scale = scale_named(self.scale)
        if scale is None:
            raise UsageError(f"unknown scale {arg.shown(self.scale)}: choose one of {known_scales()}")
        object.__setattr__(self, "results", list(self.results))
        object.__setattr__(self, "scale", scale)

    @classmethod
    def from_hits(cls, questions: Sequence[Question], hits: Sequence[Sequence[Sequence[Any]]], top_n: int = 10,
                  aggregate: str = "sum") -> ScoredQuestions:
        """Option scores made of each option's retrieved paragraphs as the IR methods make them: the
        ``aggregate`` of the scores of the option's ``top_n`` best hits.

        :param questions: the questions (a list of ``Question``).
        :param hits: for each question, for each of its options in order, the hits of its query, best
            first (anything with a ``score``: an engine's hits, ``SearchHit``s).
        :param top_n: the hits an option's score takes.
        :param aggregate: ``sum``, ``max`` or ``decay`` (each hit's score divided by its rank).
        :returns: the questions' ``ScoredQuestions`` (scale ``standardized``).
        :raises OpenQAError: on hits that do not match the questions' options (one line)."""
        from openqa.data.questions import question_list
        from openqa.scorers.ir import AGGREGATES, scores_from_hits

        questions = question_list("questions", questions)
        arg.whole("top_n", top_n, 1)
        arg.one_of("aggregate", aggregate, AGGREGATES)
        if not isinstance(hits, (list, tuple)) or len(hits) != len(questions):
            raise UsageError(f"hits must hold one list per question ({len(questions)})")
        for number, (question, per_option) in enumerate(zip(questions, hits), start=1):
            if not isinstance(per_option, (list, tuple)) or len(per_option) != len(question.options):
                raise UsageError(f"hits of question {number} must hold one list per option ({len(question.options)})")
            if not all(isinstance(h, (list, tuple)) and all(isinstance(getattr(x, "score", None), (int, float)) for x in h)
                       for h in per_option):
                raise UsageError(f"hits of question {number}: each option's hits must be a list of hits with scores")
        return cls(scores_from_hits(questions, [list(map(list, h)) for h in hits], top_n, aggregate))

    def summary(self) -> dict[str, Any]:
        """The accuracy as a result record states it: ``n``, ``correct``, ``accuracy`` (%, a tie
        counting the share of its tied letters that is right) with its 95% interval, and the ties."""
        from openqa.evaluate.metrics import summarise

        return summarise(self.results)

    @property
    def accuracy(self) -> float:
        """The accuracy (0-100) of ``summary``."""
        return float(self.summary()["accuracy"])

    @property
    def letter_prior(self) -> dict[str, float]:
        """Letter-probability scores' mean probability of each letter over the questions (what an
        ensemble divides out of an LLM part's, see ``openqa.scorers.ensemble``); empty on another scale."""
        from openqa.scorers.ensemble import letter_prior

        return letter_prior(self.results, self.scale)

    def logits(self) -> list[np.ndarray]:
        """Each question's option scores on its scale's logits, in option order."""
        from openqa.scorers.logits import option_logits

        return [option_logits(r, self.scale) for r in self.results]

    def with_logits(self, logits: Sequence[np.ndarray]) -> ScoredQuestions:
        """The same questions with ``logits`` as their option scores (scale ``logits``; evidence and
        details left out): another way of making logits of the scores, to calibrate and compare.

        :param logits: one array a question, one number an option in option order.
        :returns: their ``ScoredQuestions``.
        :raises OpenQAError: on logits that do not match the questions' options (one line)."""
        import numpy as np

        from openqa.scorers.base import OptionScores

        if not isinstance(logits, (list, tuple)) or len(logits) != len(self.results):
            raise UsageError(f"logits must hold one array per question ({len(self.results)})")
        rows = []
        for number, (result, z) in enumerate(zip(self.results, logits), start=1):
            if not isinstance(z, np.ndarray) or z.shape != (len(result.scores),):
                raise UsageError(f"logits of question {number} must be an array of one number per option ({len(result.scores)})")
            rows.append(OptionScores(result.question, dict(zip(result.scores, map(float, z)))))
        return ScoredQuestions(rows, "logits")

    def calibration(self, dataset: str = "dev") -> dict[str, Any]:
        """The temperature that makes these scores' logits the likeliest probabilities of the
        answers (fitted on these questions, as ``openqa tune`` fits it on dev), and how those
        probabilities rank the answers: ``temperature`` with the confidence report of a result
        record (``ece``, ``brier``, ``log_likelihood``, ``aurc``, ``accuracy_at_coverage``...).

        :param dataset: what the questions are, as the fit names them.
        :returns: the temperature and the report.
        :raises OpenQAError: when no question has its answer among the options (one line)."""
        from openqa.evaluate.calibration import Calibration, confidence_report

        fitted = Calibration.fit(self.results, self.scale, arg.text("dataset", dataset), {})
        return {"temperature": fitted.temperature, **confidence_report(self.results, [fitted.probabilities(r) for r in self.results])}


@dataclass(frozen=True)
class HeldOut:
    """What ``CrossValidation.held_out`` measured, per question (those with their answer among the
    options): ``log_likelihood`` of its answer under weights fitted without it, and ``right``, the
    share of it the ensemble got right (1, 0, or a tie's expected share)."""

    log_likelihood: np.ndarray
    right: np.ndarray

    def __post_init__(self) -> None:
        """Refuse fields that are not equally long 1-D arrays of numbers (one line); lists are taken as arrays."""
        import numpy as np

        for name in ("log_likelihood", "right"):
            value = getattr(self, name)
            if not isinstance(value, (np.ndarray, list, tuple)):
                raise UsageError(f"{name} must be an array of numbers (one a question), not {type(value).__name__}")
            try:
                array = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                raise UsageError(f"{name} must be an array of numbers (one a question)") from None
            if array.ndim != 1:
                raise UsageError(f"{name} must be a 1-D array (one number a question), not {array.ndim}-D")
            object.__setattr__(self, name, array)
        if len(self.log_likelihood) != len(self.right):
            raise UsageError(f"log_likelihood and right must be as long as each other ({len(self.log_likelihood)} and {len(self.right)})")

    def summary(self) -> dict[str, float]:
        """The mean held-out ``log_likelihood`` (4 decimals) and ``accuracy`` (%, 2 decimals); NaN for no questions."""
        if not len(self.right):
            return {"log_likelihood": float("nan"), "accuracy": float("nan")}
        return {"log_likelihood": round(float(self.log_likelihood.mean()), 4), "accuracy": round(100 * float(self.right.mean()), 2)}


@dataclass(frozen=True)
class CrossValidation:
    """How parts do as an ensemble on questions it was not fitted on: the questions dealt into
    ``folds`` seeded folds, the weights fitted (under the penalty ``l2``) on all folds but one and
    the held-out fold's answers measured, each fold in turn (``openqa tune`` fits an ensemble's
    temperature on the same held-out logits). A field left None is the ensemble's own (5 folds,
    seed 0, its L2 penalty).

    :param folds: the number of folds.
    :param seed: the seed of the folds' random order.
    :param l2: the penalty on the weights (objective: log-likelihood - l2 / 2 * |weights|^2).
    :raises OpenQAError: on fewer than 2 folds or a negative penalty (one line)."""

    folds: int | None = None
    seed: int | None = None
    l2: float | None = None

    def __post_init__(self) -> None:
        from openqa.evaluate.calibration import CROSS_FIT_FOLDS, CROSS_FIT_SEED
        from openqa.methods import ENSEMBLE_L2

        folds = CROSS_FIT_FOLDS if self.folds is None else arg.whole("folds", self.folds, 2)
        seed = CROSS_FIT_SEED if self.seed is None else arg.whole("seed", self.seed, 0)
        l2 = ENSEMBLE_L2 if self.l2 is None else self.l2
        if isinstance(l2, bool) or not isinstance(l2, (int, float)) or not 0 <= l2 < float("inf"):
            raise UsageError(f"l2 must be a penalty of 0 or more, not {arg.shown(l2)}")
        for name, value in (("folds", folds), ("seed", seed), ("l2", l2)):
            object.__setattr__(self, name, value)

    def held_out(self, parts: Mapping[str, ScoredQuestions], letter_priors: bool = True) -> HeldOut:
        """Each question's held-out log-likelihood and share right under the ensemble of ``parts``
        (each part's logits on its own scale; with ``letter_priors``, the letter prior of a
        letter-probability part, measured on all the questions as ``openqa tune`` measures it,
        divided out first).

        :param parts: label -> the part's ``ScoredQuestions``, all of the same questions in the same order.
        :param letter_priors: divide each letter-probability part's letter prior out.
        :returns: the ``HeldOut`` figures.
        :raises OpenQAError: on no parts, parts of other questions, or fewer than two questions (one line)."""
        import numpy as np

        from openqa.evaluate.calibration import cross_fitted_logits, softmax
        from openqa.scorers.ensemble import logit_features

        if not isinstance(parts, Mapping) or not parts or not all(isinstance(p, ScoredQuestions) for p in parts.values()):
            raise UsageError("parts must map each label to its ScoredQuestions (at least one)")
        arg.flag("letter_priors", letter_priors)
        first = next(iter(parts.values())).results
        if any([r.question.digest() for r in p.results] != [r.question.digest() for r in first] for p in parts.values()):
            raise UsageError("every part must score the same questions in the same order")
        priors = {label: prior for label, part in parts.items() if (prior := part.letter_prior)} if letter_priors else {}
        features, answers = logit_features({label: part.results for label, part in parts.items()},
                                           [part.scale for part in parts.values()], [priors.get(label, {}) for label in parts])
        assert self.folds is not None and self.seed is not None and self.l2 is not None  # set in __post_init__
        loglik, right = [], []
        for z, answer in zip(cross_fitted_logits(features, answers, self.l2, self.folds, self.seed), answers):
            p = softmax(z)
            loglik.append(float(np.log(max(p[answer], LIKELIHOOD_FLOOR))))
            best = np.flatnonzero(p >= p.max() - TIED)
            right.append(float(answer in best) / len(best))
        return HeldOut(np.array(loglik), np.array(right))


def score_parts(questions: Sequence[Question], dataset: str, parts: Sequence[str] | None = None, *,
                predictions: Mapping[str, str | Path] | None = None, progress: bool = False,
                workspace: Workspace | None = None, **where: Any) -> dict[str, ScoredQuestions]:
    """Each of ``parts`` opened for ``dataset``'s exam with its dev-tuned settings (and the settings
    its spec gives), as ``openqa tune --method ensemble`` opens an ensemble's parts (one opening of
    each index shared by all), and its option scores of ``questions``: parts scored once, to be
    judged together in any combination (``CrossValidation``).

    :param questions: the questions (a list of ``Question``), the same for every part.
    :param dataset: the dataset whose exam and dev-tuned settings apply (``us``, ``mainland``...).
    :param parts: methods, each ``METHOD`` or ``METHOD:setting=value;...`` (``ir-custom:top_n=1``),
        or labels of ``predictions`` (default: the exam language's default ensemble parts).
    :param predictions: label -> a predictions file whose option scores that part reads (an
        ``openqa eval`` run's, or a compact one), matched to the questions by content.
    :param progress: show progress bars.
    :param workspace: where data, indexes, settings and results are (a ``Workspace``); its fields may
        also be given as keywords (``data_dir=...``, ``index_dir=...``), each defaulting to its
        environment variable.
    :returns: label -> its ``ScoredQuestions``, in the order of ``parts``.
    :raises OpenQAError: on an unknown dataset, method or setting, a part named twice, a predictions
        file no part reads or that lacks a question, or a missing index (one line)."""
    from openqa.data.questions import DATASETS, question_list
    from openqa.methods import DEFAULT_PARTS, Part, Request, open_method
    from openqa.scorers.precomputed import PrecomputedScorer
    from openqa.workspace import Exam

    questions = question_list("questions", questions)
    target = Exam.resolve(arg.one_of("dataset", dataset, DATASETS))
    specs = DEFAULT_PARTS[target.lang] if parts is None else arg.texts("parts", parts)
    if predictions is not None and not isinstance(predictions, Mapping):
        raise UsageError(f"predictions must map labels to files, not {type(predictions).__name__}")
    files = {arg.text("predictions label", label): arg.path("predictions", file) for label, file in (predictions or {}).items()}
    if None in files.values():
        raise UsageError("predictions must name a file for each label, not None")
    arg.flag("progress", progress)
    ctx = Workspace.of(workspace, **where).context().sharing()
    scored: dict[str, ScoredQuestions] = {}
    for spec in specs:
        part = Part.parse(spec, frozenset(files))
        if part.label in scored:
            raise UsageError(f"part {part.label!r} is named twice: name each part once")
        scorer = (PrecomputedScorer(Path(str(files[part.label])), part.label) if part.precomputed
                  else open_method(ctx, part.method, target, Request(part.overrides)).scorer)
        with shown(progress):
            scored[part.label] = ScoredQuestions(scorer.score(questions, progress), scorer.scale)
    if unused := sorted(set(files) - set(scored)):
        raise UsageError(f"predictions names part {unused[0]!r}, which is not among the parts ({', '.join(scored)})")
    return scored


def exam_bank(dataset: str, *, banks: Sequence[str | Path] = (), workspace: Workspace | None = None,
              **where: Any) -> QuestionBank:
    """The solved questions the bank method votes from for ``dataset``'s exam: the dataset's dev
    split, and its train split where the data folder has one, and the files in ``banks``.

    :param dataset: a named dataset (``us``, ``mainland``...).
    :param banks: files of solved questions added to the bank (any question format openqa reads).
    :param workspace: where the data is (a ``Workspace``); its fields may also be given as keywords
        (``data_dir=...``), each defaulting to its environment variable.
    :returns: the ``QuestionBank`` (its ``describe()`` says where its questions came from).
    :raises OpenQAError: on an unknown dataset, missing data or a bad bank file (one line)."""
    from openqa.data.questions import DATASETS
    from openqa.methods.bank import load_bank
    from openqa.workspace import Exam

    target = Exam.resolve(arg.one_of("dataset", dataset, DATASETS))
    files = bank_files(banks)
    return load_bank(Workspace.of(workspace, **where).context(), target, files)
