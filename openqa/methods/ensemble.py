"""The ensemble method: named parts (run, or read from predictions files) combined by weights
fitted on dev (``openqa tune --method ensemble``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence, cast

from openqa.config import DEFAULT_METHOD as DEFAULT_METHOD  # the default method, named beside the registry
from openqa.config import OptionSource
from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.evaluate.calibration import (
    CROSS_FIT_FOLDS,
    CROSS_FIT_SEED,
    IN_SAMPLE,
    cross_fitted_logits,
    fit_conditional_logit,
)
from openqa.evaluate.metrics import summarise
from openqa.methods.bank import bank_file_digests
from openqa.methods.base import FIRST_PART_KEYS, PMI_LIMITS, SECONDS, Cost, Limits, Method, Opened, Overrides, Request
from openqa.methods.registry import METHODS, calibration_key, method, open_method
from openqa.retrieval.base import Index
from openqa.scorers.base import OptionScores
from openqa.scorers.ensemble import EnsembleScorer, letter_priors, logit_features
from openqa.tuning import (
    read_json_record,
    tuned_file,
)
from openqa.workspace import Context, Exam


@dataclass(frozen=True)
class Part:
    """One part of an ensemble: a method and the settings it is run with beyond its tuned ones,
    written ``method`` or ``method:setting=value;...`` (e.g. ``ir-custom:top_n=1``)."""

    method: str
    overrides: Overrides = Overrides()

    #: Whether the part's scores are read from a predictions file (its ``method`` is then only a label).
    precomputed: bool = False

    @classmethod
    def parse(cls, spec: str, precomputed: frozenset[str] = frozenset()) -> "Part":
        """The part ``spec`` names (a label in ``precomputed``: a part read from a predictions file);
        refused in one line when its method or a setting is unknown."""
        if spec.strip() in precomputed:
            return cls(spec.strip(), precomputed=True)
        name, _, given = spec.strip().partition(":")
        values: dict[str, Any] = {}
        for item in filter(None, (x.strip() for x in given.split(";"))):
            key, sep, value = item.partition("=")
            if not sep or key not in FIRST_PART_KEYS:
                raise OpenQAError(f"ensemble part {spec!r}: write settings as {'|'.join(FIRST_PART_KEYS)}=VALUE")
            values[key] = value
        if "top_n" in values:
            try:
                values["top_n"] = int(values["top_n"])
            except ValueError:
                raise OpenQAError(f"ensemble part {spec!r}: top_n must be a whole number") from None
        for key in values:
            if not method(name).takes(key):
                raise UsageError(f"ensemble part {spec!r}: {name} has no setting {key}")
        part = cls(method(name).name, Overrides(**values))
        if part.method == "ensemble":
            raise OpenQAError("an ensemble cannot be a part of an ensemble")
        return part

    @property
    def label(self) -> str:
        """How records and the predictions file name the part."""
        if self.precomputed:
            return self.method
        given = ";".join(f"{k}={v}" for k, v in self.overrides.given().items())
        return f"{self.method}:{given}" if given else self.method


#: The parts an ensemble combines unless ``--parts`` says otherwise, per language: training-free
#: methods that need no download (IR-Custom at its dev-tuned depth and at other depths of the tuning
#: grid, and PMI), the set with the best 5-fold cross-validated dev likelihood among those tried
#: (``python scripts/studies/ensemble_parts.py`` -> eval/results/studies/ensemble-parts-dev.json; us dev for English,
#: mainland dev for Chinese).
DEFAULT_PARTS: dict[str, tuple[str, ...]] = {
    "en": ("ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=50", "pmi"),
    "zh": ("ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=3", "ir-custom:top_n=50", "pmi"),
}
#: The L2 penalty on an ensemble's weights (objective: dev log-likelihood - L2 / 2 * |weights|^2),
#: chosen with the parts (the penalties tried changed the held-out likelihood in the fourth decimal).
ENSEMBLE_L2 = 0.1


@dataclass(frozen=True)
class EnsembleSettings:
    """What ``openqa tune`` fits for an ensemble: its parts and their weights (under ``l2``), the
    part with the best dev accuracy (what an evaluation compares the ensemble with), and each
    letter-probability part's letter prior (``openqa.scorers.ensemble.letter_prior``)."""

    parts: tuple[str, ...]
    weights: tuple[float, ...]
    l2: float = ENSEMBLE_L2
    best_part: str = ""
    letter_priors: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The parts it was fitted with that were read from predictions files (``--predictions LABEL=FILE``).
    from_files: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EnsembleMethod(Method):
    """Named methods' option logits combined by weights fitted on dev (a conditional logit; see
    ``openqa.scorers.ensemble``); parts that read the same index share one opening of it."""

    name: str
    summary: str
    tunes: bool = True
    fuses_parts: bool = True
    limits: Limits = PMI_LIMITS
    display_name: str = "Ensemble"
    cost: Cost = SECONDS

    def takes_llm(self, model_given: bool) -> bool:
        """When a model is named: for an ``llm`` part (``--parts ...,llm``, or weights fitted with one)."""
        return model_given

    def require(self, request: Request) -> None:
        """Also refuse parts that name nothing usable (an unknown setting, a part twice) before any work:
        ``openqa tune`` takes the pair's lock (a file in the settings folder) after this."""
        super().require(request)
        if request.parts:
            self.parts_for("en", request)  # (the language only picks the default parts, not used here)

    def parts_for(self, lang: str, request: Request) -> tuple[Part, ...]:
        """The parts ``request`` names, else the language's default ones."""
        labels = frozenset(label for label, _ in request.predictions)
        parts = tuple(Part.parse(spec, labels) for spec in (request.parts or DEFAULT_PARTS[lang]))
        named = [p.label for p in parts]
        twice = next((label for i, label in enumerate(named) if label in named[:i]), None)
        if twice is not None:  # the parts are keyed by label: a second one would vanish, and the fit with it
            raise UsageError(f"ensemble part {twice!r} is named twice in --parts: name each part once")
        unused = labels - {p.label for p in parts}
        if unused:
            raise UsageError(f"--predictions names part {sorted(unused)[0]!r}, which is not among the parts "
                             f"({', '.join(p.label for p in parts)})")
        return parts

    def reads(self, lang: str, request: Request = Request()) -> tuple[tuple[str, str], ...]:
        parts = [p for p in self.parts_for(lang, request) if not p.precomputed]
        return tuple(sorted({key for p in parts for key in method(p.method).reads(lang, Request(p.overrides, llm=request.llm))}))

    def work_units(self, opened: Opened, question: Question, lang: str) -> float:
        """Its parts' estimated seconds, summed (a part read from a predictions file costs nothing)."""
        from openqa.scorers.precomputed import PrecomputedScorer

        return sum(method(label.partition(":")[0]).estimate(part, question, lang).seconds for label, part in opened.parts.items()
                   if not isinstance(part.scorer, PrecomputedScorer))

    def uses_bank(self, request: Request) -> bool:
        """Whether a part may read the bank: known only once its parts are (a named ensemble's are
        fitted), so it is said here of any ensemble, and ``open_method`` refuses ``--bank`` for
        one opened without a bank part."""
        return True

    @staticmethod
    def _part_request(part: Part, request: Request) -> Request:
        """What a part is opened with: the ensemble's model and LLM, and its ``--bank`` files where
        the part reads solved questions."""
        given = Request(part.overrides, model=request.model, llm=request.llm)
        if method(part.method).uses_bank(given):
            given = replace(given, banks=request.banks, allow_bank_overlap=request.allow_bank_overlap)
        return given

    def variant(self, request: Request) -> list[str]:
        """The name its weights are filed under, when given (``Request.ensemble``)."""
        return [request.ensemble] if request.ensemble else []

    def baseline(self, request: Request) -> Request | None:
        """A named ensemble (one with an LLM, say) is compared with the exam's own."""
        return Request() if request.ensemble else None

    def _open_parts(self, ctx: Context, target: Exam, parts: Sequence[Part], request: Request) -> dict[str, Opened]:
        """Each part opened: those run, sharing one opening of each index, then those read from
        predictions files (``PrecomputedScorer``), which show the first run part's index."""
        from openqa.scorers.precomputed import PrecomputedScorer

        shared = ctx.sharing()
        files = dict(request.predictions)
        run = {p.label: open_method(shared, p.method, target, self._part_request(p, request)) for p in parts if not p.precomputed}
        if not run:
            raise UsageError("an ensemble needs at least one part that runs (its index shows the evidence)")
        index = next(iter(run.values())).index
        read = {p.label: Opened(PrecomputedScorer(Path(files[p.label]), p.label), index,
                                {"file": Path(files[p.label]).name, "sources": {"file": OptionSource("predictions")}})
                for p in parts if p.precomputed}
        return {p.label: (read | run)[p.label] for p in parts}

    def fitted(self, ctx: Context, target: Exam, request: Request = Request()) -> tuple[EnsembleSettings, str]:
        """The weights ``openqa tune`` fitted for ``target.dataset`` (yours, else shipped; under the
        request's ensemble name, if any) and where they came from; refused in one line when there are none."""
        key = calibration_key(self.name, request)
        path, where = tuned_file(key, target.dataset, ctx.settings.tuned_dir(), ctx.corpus)
        if path is None:
            named = f" --ensemble {request.ensemble}" if request.ensemble else ""
            raise OpenQAError(f"no ensemble{named and ' ' + repr(request.ensemble)} is fitted for {target.dataset}: "
                              f"run openqa tune --method ensemble --dataset {target.dataset}{named}")
        record = read_json_record(path, "ensemble record")
        try:
            chosen = record["chosen"]
            priors = {str(label): {str(letter): float(p) for letter, p in prior.items()}
                      for label, prior in chosen.get("letter_priors", {}).items()}  # none before they were fitted
            fitted = EnsembleSettings(tuple(chosen["parts"]), tuple(float(w) for w in chosen["weights"]), float(chosen["l2"]),
                                      str(chosen["best_part"]), priors, tuple(map(str, chosen.get("from_files", []))))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise OpenQAError(f"{path}: unreadable ensemble record ({type(exc).__name__}: {exc}); rerun `openqa tune`") from None
        if len(fitted.parts) != len(fitted.weights) or not fitted.parts or fitted.best_part not in fitted.parts:
            raise OpenQAError(f"{path}: unreadable ensemble record (parts and weights differ); rerun `openqa tune`")
        if any(label not in fitted.parts or not all(0 < p <= 1 for p in prior.values())
               for label, prior in fitted.letter_priors.items()):
            raise OpenQAError(f"{path}: unreadable ensemble record (a letter prior of no part, or not a probability); "
                              "rerun `openqa tune`")
        given = record.get("banks")
        banks: list[Any] = given if isinstance(given, list) else []
        fitted_with = [b.get("sha256") for b in banks if isinstance(b, dict)]
        reads_bank = any(METHODS[m].uses_bank(Request()) for m in (label.partition(":")[0] for label in fitted.parts) if m in METHODS)
        if reads_bank and bank_file_digests(request.banks) != fitted_with:
            name = f"ensemble {request.ensemble}" if request.ensemble else f"{target.dataset} ensemble"
            files = ", ".join(f"--bank {b.get('file')} (sha256 {str(b.get('sha256'))[:12]})" for b in banks if isinstance(b, dict))
            raise OpenQAError(f"the {name} was fitted with {files or 'no --bank file'}: give the same bank files "
                              f"(or fit another: openqa tune --method ensemble --dataset {target.dataset} --ensemble NAME --bank ...)")
        return fitted, where

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        fitted, where = self.fitted(ctx, target, request)
        labels = frozenset(label for label, _ in request.predictions)
        if request.parts and tuple(Part.parse(p, labels).label for p in request.parts) != fitted.parts:
            raise OpenQAError(f"the {target.dataset} ensemble was fitted over {', '.join(fitted.parts)}: "
                              f"run openqa tune --method ensemble --dataset {target.dataset} --parts ... to fit others")
        for label in fitted.parts:  # a part fitted from a file (or, in a record before they were listed, no method's)
            if label not in labels and (label in fitted.from_files or label.partition(":")[0].strip() not in METHODS):
                name = f"ensemble {request.ensemble}" if request.ensemble else f"{target.dataset} ensemble"
                raise OpenQAError(f"the {name} reads part {label!r} from a predictions file: give --predictions {label}=FILE")
        parts = self.parts_for(target.lang, replace(request, parts=fitted.parts))
        opened = self._open_parts(ctx, target, parts, request)
        scorer = EnsembleScorer({label: o.scorer for label, o in opened.items()}, fitted.weights, fitted.letter_priors)
        shown = next((o for o in opened.values() if o.retriever is not None), next(iter(opened.values())))
        settings = {"parts": list(fitted.parts), "weights": dict(zip(fitted.parts, fitted.weights)), "l2": fitted.l2,
                    "best_part": fitted.best_part, "letter_priors": fitted.letter_priors, "exam": target.exam,
                    "part_settings": {label: o.settings for label, o in opened.items()},
                    "sources": {"parts": where, "weights": where, "l2": where, "best_part": where, "letter_priors": where,
                                "exam": target.source}}
        return Opened(scorer, shown.index, settings, parts=opened)

    def tune(self, ctx: Context, target: Exam, questions: Sequence[Question], request: Request = Request(),
             ) -> tuple[EnsembleSettings, list[dict[str, Any]], Index]:
        """Fit the letter priors and weights of the parts on dev ``questions`` (each part with its own
        dev-tuned settings); the grid lists each part's dev accuracy and weight, then the ensemble's."""
        parts = self.parts_for(target.lang, request)
        opened = self._open_parts(ctx, target, parts, request)
        scorers = {label: o.scorer for label, o in opened.items()}
        scored = EnsembleScorer(scorers, [1.0] * len(opened)).part_scores(questions)
        priors = letter_priors(scorers, scored)
        features, answers = ensemble_features(EnsembleScorer(scorers, [1.0] * len(opened), priors), scored)
        weights = tuple(round(float(w), 6) for w in fit_conditional_logit(features, answers, l2=ENSEMBLE_L2))
        table = [{"part": label, "weight": w, **summarise(scored[label])} for label, w in zip(opened, weights)]
        best_part = max(table, key=lambda row: row["accuracy"])["part"]  # the first listed among equals
        best = EnsembleSettings(tuple(opened), weights, ENSEMBLE_L2, best_part, priors,
                                tuple(p.label for p in parts if p.precomputed))
        combined = EnsembleScorer(scorers, best.weights, priors).combine(scored)
        table.append({"part": "ensemble", **summarise(combined)})
        first = next(iter(opened.values()))
        return best, table, first.index

    def calibration_scores(self, opened: Opened, results: list[OptionScores], parts: dict[str, list[OptionScores]],
                           ) -> tuple[list[OptionScores], str]:
        """Its weights were fitted on these dev questions, so its logits there are surer than they
        will be on new questions: the temperature is fitted on each question's logits under weights
        fitted without it (``cross_fitted_logits``, the penalty of the fit)."""
        features, answers = ensemble_features(cast(EnsembleScorer, opened.scorer), parts)
        if len(features) < 2:
            return results, IN_SAMPLE
        logits = cross_fitted_logits(features, answers, float(opened.settings["l2"]))
        known = [r for r in results if r.question.answer_idx in r.scores]  # those ensemble_features keeps
        held = [replace(r, scores=dict(zip(r.scores, map(float, z))), details={}) for r, z in zip(known, logits)]
        return held, (f"logits under weights fitted without each question "
                      f"({min(CROSS_FIT_FOLDS, len(features))}-fold cross-fitting, seed {CROSS_FIT_SEED})")


def ensemble_features(scorer: EnsembleScorer, scored: dict[str, list[OptionScores]]) -> tuple[list[Any], list[int]]:
    """Each dev question's (options x parts) logits, letter priors divided out, and the index of its
    correct option (questions whose answer is not among the options are left out)."""
    return logit_features(scored, [s.scale for s in scorer.parts.values()], [scorer.priors.get(label, {}) for label in scorer.parts])

