"""The ensemble method: named parts (run, or read from predictions files) combined by weights
fitted on dev (``openqa tune --method ensemble``)."""

from __future__ import annotations

import json
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
    file_digest,
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
#: The settings of an llm part that its weights and calibration hold for: a fitted ensemble refuses
#: an llm part opened with others (another model's letters are not the fitted one's).
LLM_IDENTITY = ("model", "evidence", "scoring", "top_k", "evidence_tokens", "demonstrations")


def llm_identity(settings: dict[str, Any]) -> dict[str, Any]:
    """The ``LLM_IDENTITY`` settings of an llm part's record."""
    return {key: settings.get(key) for key in LLM_IDENTITY}


def file_settings(path: Path) -> dict[str, Any]:
    """The settings of the record beside a predictions file (``NAME.json`` beside ``NAME.jsonl`` or
    ``NAME.predictions.jsonl``), or none."""
    record = path.with_name(path.name.removesuffix(".jsonl").removesuffix(".predictions") + ".json")
    try:
        settings = json.loads(record.read_text(encoding="utf-8")).get("settings")
    except (OSError, ValueError, AttributeError):
        return {}
    return settings if isinstance(settings, dict) else {}


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
    #: Its llm part's model and settings (``LLM_IDENTITY``) when fitted (none: no llm part, or unknown).
    llm: dict[str, Any] = field(default_factory=dict)
    #: The ``--bank`` files its bank part was fitted with, as ``{"file", "sha256"}`` (none: the exam's own bank alone).
    banks: tuple[dict[str, str], ...] = ()


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
                                {"file": Path(files[p.label]).name, "sha256": file_digest(Path(files[p.label])),
                                 "sources": {"file": OptionSource("predictions"), "sha256": "the file's bytes"}})
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
                                      str(chosen["best_part"]), priors, tuple(map(str, chosen.get("from_files", []))),
                                      dict(chosen.get("llm") or {}))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise OpenQAError(f"{path}: unreadable ensemble record ({type(exc).__name__}: {exc}); rerun `openqa tune`") from None
        if len(fitted.parts) != len(fitted.weights) or not fitted.parts or fitted.best_part not in fitted.parts:
            raise OpenQAError(f"{path}: unreadable ensemble record (parts and weights differ); rerun `openqa tune`")
        if any(label not in fitted.parts or not all(0 < p <= 1 for p in prior.values())
               for label, prior in fitted.letter_priors.items()):
            raise OpenQAError(f"{path}: unreadable ensemble record (a letter prior of no part, or not a probability); "
                              "rerun `openqa tune`")
        banks = record.get("banks")
        banks = banks if isinstance(banks, list) else []
        fitted = replace(fitted, banks=tuple({"file": str(b.get("file")), "sha256": str(b.get("sha256"))}
                                             for b in banks if isinstance(b, dict)))
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
        if request.llm is not None and not model_parts(fitted.parts):  # the model would be dropped without a word
            name = f"ensemble {request.ensemble}" if request.ensemble else f"{target.dataset} ensemble"
            raise UsageError(f"--model and the LLM flags apply to an ensemble with an llm part; the {name} combines "
                             f"{', '.join(fitted.parts)}: leave them out, or name one fitted with an LLM (--ensemble NAME)")
        parts = self.parts_for(target.lang, replace(request, parts=fitted.parts))
        opened = self._open_parts(ctx, target, parts, request)
        self._check_llm(ctx, fitted, [opened[p.label] for p in parts if not p.precomputed and p.label in model_parts([p.label])],
                        f"ensemble {request.ensemble}" if request.ensemble else f"{target.dataset} ensemble")
        other_bank = self._bank_note(ctx, fitted, request, f"ensemble {request.ensemble}" if request.ensemble else f"{target.dataset} ensemble")
        if other_bank:
            where = f"{where} ({other_bank})"
        scorer = EnsembleScorer({label: o.scorer for label, o in opened.items()}, fitted.weights, fitted.letter_priors)
        shown = next((o for o in opened.values() if o.retriever is not None), next(iter(opened.values())))
        settings = {"parts": list(fitted.parts), "weights": dict(zip(fitted.parts, fitted.weights)), "l2": fitted.l2,
                    "best_part": fitted.best_part, "letter_priors": fitted.letter_priors, "exam": target.exam,
                    "part_settings": {label: o.settings for label, o in opened.items()},
                    "sources": {"parts": where, "weights": where, "l2": where, "best_part": where, "letter_priors": where,
                                "exam": target.source}}
        return Opened(scorer, shown.index, settings, parts=opened)

    @staticmethod
    def _bank_note(ctx: Context, fitted: EnsembleSettings, request: Request, name: str) -> str:
        """What a run must say when its bank part reads other ``--bank`` files than the fit's (a fit
        on a bank that held its dev questions, used without it; your own solved questions added to
        a fit on the exam's bank): the weights and probabilities were fitted on another bank. Said
        once to the context and in the sources of the record's settings; empty when the banks agree."""
        reads_bank = any(METHODS[m].uses_bank(Request()) for m in (label.partition(":")[0] for label in fitted.parts) if m in METHODS)
        if not reads_bank or bank_file_digests(request.banks) == [b["sha256"] for b in fitted.banks]:
            return ""
        was = ", ".join(f"--bank {b['file']} (sha256 {b['sha256'][:12]})" for b in fitted.banks) or "the exam's own bank alone"
        now = ", ".join(f"--bank {Path(f).name}" for f in request.banks) or "the exam's own bank alone"
        note = f"its bank part was fitted with {was}; this run reads {now}"
        ctx.notify_once(f"the {name}: {note}: its weights and probabilities were fitted on another bank")
        return note

    @staticmethod
    def _check_llm(ctx: Context, fitted: EnsembleSettings, run: list[Opened], name: str) -> None:
        """Refuse an llm part (``run``: those run, not read from files) opened with another model or
        other settings than the fit's: its weight and the ensemble's calibration hold for the fitted
        one alone. A fit that does not record its llm part's settings (before they were kept) is
        used as it is, and the context is told so."""
        for part in run:
            now = llm_identity(part.settings)
            if not fitted.llm:
                ctx.notify_once(f"the {name} does not record which model its llm part was fitted with: its weights "
                                f"and confidence assume it is {now['model']}")
            elif now != fitted.llm:
                differ = ", ".join(f"{key} {fitted.llm.get(key)!r} (here {now[key]!r})" for key in LLM_IDENTITY
                                   if fitted.llm.get(key) != now[key])
                raise UsageError(f"the {name} was fitted with another llm part: {differ}; give its model and LLM flags, "
                                 "or fit one for this model (openqa tune --method ensemble --parts ...,llm --ensemble NAME)")

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
        llm = next((llm_identity(file_settings(Path(dict(request.predictions)[p.label])) if p.precomputed
                                 else opened[p.label].settings) for p in parts if p.label in model_parts([p.label])), {})
        best = EnsembleSettings(tuple(opened), weights, ENSEMBLE_L2, best_part, priors,
                                tuple(p.label for p in parts if p.precomputed), llm if any(llm.values()) else {})
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


def model_parts(labels: Sequence[str]) -> list[str]:
    """The parts among ``labels`` that run the model a command names (``--model``: an LLM reader's)."""
    return [label for label in labels if label.partition(":")[0] in METHODS and not METHODS[label.partition(":")[0]].fuses_parts
            and METHODS[label.partition(":")[0]].takes_llm(True)]


def ensemble_features(scorer: EnsembleScorer, scored: dict[str, list[OptionScores]]) -> tuple[list[Any], list[int]]:
    """Each dev question's (options x parts) logits, letter priors divided out, and the index of its
    correct option (questions whose answer is not among the options are left out)."""
    return logit_features(scored, [s.scale for s in scorer.parts.values()], [scorer.priors.get(label, {}) for label in scorer.parts])

