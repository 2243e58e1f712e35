"""Methods by name, each carrying everything that is special about it.

A method is what ``--method`` names: how its scorer is opened (over which index, with which
settings and where each comes from), how ``openqa tune`` searches its settings on dev, whether it
retrieves paragraphs (and so can feed a reader), and what distinguishes its result files. The
commands in ``openqa.pipeline`` ask the method for each of these and name none; adding a method is
one module with its scorer plus one entry in ``METHODS``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generic, Sequence, TypeVar, cast

from openqa.config import DEFAULT_METHOD as DEFAULT_METHOD  # the default method, named beside the registry
from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.evaluate.calibration import (
    CROSS_FIT_FOLDS,
    CROSS_FIT_SEED,
    IN_SAMPLE,
    Calibration,
    cross_fitted_logits,
    fit_conditional_logit,
    uncalibrated,
)
from openqa.evaluate.metrics import summarise
from openqa.extras import needs
from openqa.languages import language
from openqa.llm.settings import LLMSettings
from openqa.retrieval.base import Index, SearchEngine
from openqa.retrieval.custom_bm25 import QUERY_PRESETS, CustomBM25, QueryParams
from openqa.retrieval.dense import DenseIndex
from openqa.retrieval.elastic import ElasticBM25
from openqa.retrieval.hybrid import FusedEngine, Fusion
from openqa.retrieval.lucene import LuceneBM25
from openqa.retrieval.positional import PositionalIndex
from openqa.retrieval.registry import engine_class
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ensemble import EnsembleScorer, letter_priors
from openqa.scorers.hybrid import HybridScorer
from openqa.scorers.ir import IRScorer, IRSettings
from openqa.scorers.pmi import PMIScorer
from openqa.scorers.query import TUNED_QUERY_MODES
from openqa.tuning import (
    load_calibration,
    read_json_record,
    resolve_settings,
    tune_fusion,
    tune_ir,
    tune_query_mode,
    tuned_file,
)
from openqa.workspace import Context, Exam

#: The scorer an ``IndexMethod`` makes (IR-Custom's, IR-ES's and dense's an ``IRScorer``, PMI's a ``PMIScorer``).
ScorerT = TypeVar("ScorerT", bound=OptionScorer)
#: The kind of index a method reads (``_needs``).
IndexT = TypeVar("IndexT", bound=Index)
#: A dev search: (a maker of the method's scorer for given settings, dev questions, query modes)
#: -> (the best settings, the grid's rows).
Tuner = Callable[[Callable[[IRSettings], ScorerT], Sequence[Question], Sequence[str]], tuple[IRSettings, list[dict[str, Any]]]]


@dataclass(frozen=True)
class Overrides:
    """Settings given on the command line; each replaces its tuned value."""

    top_n: int | None = None
    aggregate: str | None = None
    query: str | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Request:
    """What a command asks of a method beyond the exam: settings that override tuned ones, another
    engine for its index, a model (a reader's checkpoint), an LLM reader's settings."""

    overrides: Overrides = Overrides()
    engine: str | None = None
    model: str | None = None
    llm: LLMSettings | None = None
    parts: tuple[str, ...] | None = None
    #: Ensemble parts read from predictions files instead of being run: (part label, file) pairs.
    predictions: tuple[tuple[str, str], ...] = ()
    #: The name an ensemble's fitted weights are filed under (default: none, the exam's own ensemble).
    ensemble: str | None = None


@dataclass(frozen=True)
class Opened:
    """A method ready to score: its scorer, the index it reads, the settings it uses with the
    source of each (``settings["sources"]``), and, for a method that retrieves paragraphs, the IR
    scorer that finds each option's evidence (for readers and ``eval --retrieval``); ``calibration``
    turns its option scores into probabilities (``open_method`` finds it), ``parts`` holds the opened
    parts of an ensemble."""

    scorer: OptionScorer
    index: Index
    settings: dict[str, Any]
    retriever: IRScorer | None = None
    calibration: Calibration | None = None
    parts: dict[str, "Opened"] = field(default_factory=dict)

    def probabilities(self, result: OptionScores) -> dict[str, float]:
        """Each option's probability under the method's calibration (temperature 1 without one)."""
        return (self.calibration or uncalibrated(self.scorer.scale)).probabilities(result)


class Method(ABC):
    """A scoring method, registered in ``METHODS`` under ``name``."""

    name: str
    #: One line for ``--help``.
    summary: str
    #: Whether the method retrieves paragraphs per option (an IR scorer), so it can give a reader evidence.
    retrieves: bool = False
    #: The engine whose index it reads unless ``--engine`` says otherwise (None: it reads no one index).
    engine: str | None = None
    #: The methods whose option scores it fuses (a fused method; none otherwise).
    parts: tuple[str, ...] = ()
    #: What a ``Request`` must give before the method can be opened (said when it is missing).
    needs: str = ""
    #: Whether ``openqa tune`` searches settings of the method on dev (all methods get probabilities fitted).
    tunes: bool = False
    #: The install extra whose packages the method needs beyond its engine's (``openqa.extras``).
    extra: str | None = None
    #: Whether the method takes parts from predictions files and a name for its fit (an ensemble).
    fuses_parts: bool = False

    @abstractmethod
    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        """The method's scorer over its index, with the dev-tuned settings of ``target.dataset``
        (yours, else shipped) overridden by any ``request`` gives."""

    def tune(self, ctx: Context, target: Exam, questions: Sequence[Question], request: Request = Request(),
             ) -> tuple[Any, list[dict[str, Any]], Index]:
        """Search the method's settings on dev ``questions``: the best (a dataclass), the grid, the
        index searched."""
        raise OpenQAError(f"{self.name} has no settings to tune on dev")

    def variant(self, request: Request) -> list[str]:
        """What a result file of this method run with ``request`` adds to its name (beyond flags)."""
        return []

    def calibration_scores(self, opened: Opened, results: list[OptionScores], parts: dict[str, list[OptionScores]],
                           ) -> tuple[list[OptionScores], str]:
        """The dev scores its temperature is fitted on (from its dev ``results`` and its parts'),
        and what they are: by default its own."""
        return results, IN_SAMPLE

    def ready(self, request: Request) -> bool:
        """Whether ``request`` gives all the method needs to be opened (see ``needs``)."""
        return True

    def baseline(self, request: Request) -> Request | None:
        """What an evaluation of the method with ``request`` is also compared with, question by
        question (a named ensemble: the exam's own); none by default."""
        return None

    def takes_llm(self, model_given: bool) -> bool:
        """Whether a command hands the method an LLM reader's settings built from its flags
        (``Request.llm``), given whether a model (or a server) was named: none by default."""
        return False

    def require(self, request: Request) -> None:
        """Refuse in one line a ``request`` that lacks what the method needs."""
        if not self.ready(request):
            raise OpenQAError(f"--method {self.name} needs {self.needs}")

    def reads(self, lang: str, request: Request = Request()) -> tuple[tuple[str, str], ...]:
        """The (language, engine) indexes the method reads when opened with ``request`` (a fused
        method: its parts'; a reader: none it can name before its checkpoint is read)."""
        if self.parts:
            return tuple(sorted({key for part in self.parts for key in method(part).reads(lang, request)}))
        return ((lang, request.engine or self.engine),) if self.engine else ()

    def takes(self, setting: str) -> bool:
        """Whether an override of ``setting`` (top_n, aggregate, query) changes what the method does."""
        return False

    def one_at_a_time(self, request: Request) -> bool:
        """Whether the method, opened with ``request``, answers one question at a time whatever
        the threads (a model in process), so a server queues its requests on a thread of their own."""
        return False

    def settings(self, ctx: Context, target: Exam, overrides: Overrides, keep: Callable[[str], bool]) -> tuple[IRSettings, dict[str, Any], dict[str, str]]:
        """The tuned settings for ``target`` with ``overrides``, and the record of those ``keep``
        selects (with the exam) and their sources."""
        chosen, sources = resolve_settings(self.name, target.dataset, ctx.settings.tuned_dir(), overrides.given(), ctx.corpus)
        used = [k for k in sources if keep(k)]
        record: dict[str, Any] = {**{k: getattr(chosen, k) for k in used}, "exam": target.exam}
        return chosen, record, {**{k: sources[k] for k in used}, "exam": target.source}


@dataclass(frozen=True, kw_only=True)
class IndexMethod(Method, Generic[ScorerT]):
    """A training-free scorer over one index: ``make`` builds it from the opened index, the exam and
    the settings; ``fixed`` gives parameters the exam fixes (not tuned) and their source; ``tuner``
    searches its settings on dev."""

    name: str
    summary: str
    engine: str
    make: Callable[[Index, str, IRSettings], ScorerT]
    tuner: Tuner[ScorerT]
    fixed: Callable[[str], tuple[dict[str, Any], str]] | None = None
    retrieves: bool = True
    tunes: bool = True
    #: The settings its scorer reads (PMI reads only the query mode), which its records show.
    uses: tuple[str, ...] = ("top_n", "aggregate", "query")

    def takes(self, setting: str) -> bool:
        return setting in self.uses

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        chosen, record, sources = self.settings(ctx, target, request.overrides, lambda key: key in self.uses)
        if self.fixed:
            fixed, where = self.fixed(target.exam)
            record.update(fixed)
            sources.update(dict.fromkeys(fixed, where))
        index = ctx.open(target.lang, request.engine or self.engine)
        scorer = self.make(index, target.exam, chosen)
        # a method that retrieves scores with an IRScorer
        return Opened(scorer, index, {**record, "sources": sources}, cast(IRScorer, scorer) if self.retrieves else None)

    def tune(self, ctx: Context, target: Exam, questions: Sequence[Question], request: Request = Request(),
             ) -> tuple[IRSettings, list[dict[str, Any]], Index]:
        index = ctx.open(target.lang, request.engine or self.engine)
        modes = TUNED_QUERY_MODES if language(target.lang).medical_filter else ("full",)
        best, table = self.tuner(lambda settings: self.make(index, target.exam, settings), questions, modes)
        return best, table, index


#: Settings a fused record takes from its first part (its own tuned record holds only the fusion).
FIRST_PART_KEYS = ("top_n", "aggregate", "query")


@dataclass(frozen=True, kw_only=True)
class FusedMethod(Method):
    """Two methods' option scores fused per question, each part with its own dev-tuned settings
    (flags override both); the fusion is tuned on dev."""

    name: str
    summary: str
    parts: tuple[str, str]
    retrieves: bool = True
    tunes: bool = True
    extra: str | None = None

    def takes(self, setting: str) -> bool:
        return any(method(part).takes(setting) for part in self.parts)

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        if request.engine:
            raise OpenQAError(f"--engine does not apply to {self.name}: it reads each part's own index ({', '.join(self.parts)})")
        chosen, record, sources = self.settings(ctx, target, request.overrides, lambda key: True)
        first, second = (open_method(ctx, part, target, Request(request.overrides)) for part in self.parts)
        # the parts (ir-custom, dense) are index methods that retrieve: IR scorers over search engines
        scorer = HybridScorer(cast(IRScorer, first.scorer), cast(IRScorer, second.scorer), Fusion(chosen.fusion, chosen.weight))
        for key in FIRST_PART_KEYS:  # the fused record shows the first part's retrieval settings
            record[key], sources[key] = first.settings[key], f"{self.parts[0]}: {first.settings['sources'][key]}"
        record["parts"] = {part: opened.settings for part, opened in zip(self.parts, (first, second))}
        engine = FusedEngine(cast(SearchEngine, first.index), cast(SearchEngine, second.index), scorer.fusion)
        assert first.retriever is not None  # the part retrieves
        retriever = IRScorer(engine, first.retriever.settings, first.retriever.params)
        return Opened(scorer, engine, {**record, "sources": sources}, retriever)

    def tune(self, ctx: Context, target: Exam, questions: Sequence[Question], request: Request = Request(),
             ) -> tuple[IRSettings, list[dict[str, Any]], Index]:
        opened = self.open(ctx, target, Request(engine=request.engine))
        best, table = tune_fusion(cast(HybridScorer, opened.scorer), questions)
        return best, table, opened.index


@dataclass(frozen=True, kw_only=True)
class ReaderMethod(Method):
    """A reader trained by ``openqa train`` (``--model``: its run folder or checkpoint) over the
    evidence of the retriever, query and depth it was trained with."""

    name: str
    summary: str
    needs: str = "--model: a run folder or checkpoint written by openqa train"
    extra: str | None = None

    def ready(self, request: Request) -> bool:
        return bool(request.model)

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        from openqa.readers.registry import ReaderScorer, load_reader

        assert request.model is not None  # require() saw to it
        reader = load_reader(Path(request.model))
        trained = reader.settings
        if trained.get("corpus") != ctx.corpus:
            used = f"--corpus {trained['corpus']}" if trained.get("corpus") else "the MedQA textbooks (no --corpus)"
            raise OpenQAError(f"reader {request.model} was trained on evidence from {used}: run it with that corpus")
        retriever_target = Exam.resolve(trained.get("dataset") or target.dataset, exam=target.exam)
        name = trained.get("retriever", "ir-custom")
        retriever = open_retriever(ctx, name, retriever_target, trained.get("query"))
        scorer = ReaderScorer(reader, retriever, trained.get("top_n", 3))
        where = f"reader checkpoint {Path(request.model).name}"
        record = {"top_n": scorer.top_n, "query": retriever.settings.query, "exam": target.exam, "retriever": name}
        return Opened(scorer, retriever.engine, {**record, "sources": dict.fromkeys(record, where)})

    def variant(self, request: Request) -> list[str]:
        return [Path(request.model).resolve().name] if request.model else []


@dataclass(frozen=True, kw_only=True)
class LLMMethod(Method):
    """An instruction model choosing the option over a retriever's evidence (``openqa.llm``: its
    backend, evidence, scoring and reply cache come with ``Request.llm``)."""

    name: str
    summary: str
    needs: str = "--model: a local folder, hub id or .gguf file (or, with --endpoint, the server's model name)"
    extra: str | None = None

    def ready(self, request: Request) -> bool:
        return request.llm is not None

    def takes_llm(self, model_given: bool) -> bool:
        """Always, so that a missing ``--model`` is said in one line."""
        return True

    def one_at_a_time(self, request: Request) -> bool:
        return request.llm is not None and request.llm.endpoint is None

    def reads(self, lang: str, request: Request = Request()) -> tuple[tuple[str, str], ...]:
        """Its retriever's indexes (none for a closed book)."""
        llm = request.llm
        return method(llm.retriever).reads(lang) if llm is not None and llm.evidence != "none" else ()

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        from openqa.llm.method import open_llm

        llm = request.llm
        assert llm is not None  # require() saw to it
        evidence = open_retrieving(ctx, llm.retriever, target) if llm.evidence != "none" else None
        scorer, index, settings = open_llm(ctx, target, llm, evidence.retriever if evidence else None,
                                           evidence.settings if evidence else None)
        return Opened(scorer, index, settings)

    def variant(self, request: Request) -> list[str]:
        return [request.llm.variant()] if request.llm else []


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


@dataclass(frozen=True, kw_only=True)
class EnsembleMethod(Method):
    """Named methods' option logits combined by weights fitted on dev (a conditional logit; see
    ``openqa.scorers.ensemble``); parts that read the same index share one opening of it."""

    name: str
    summary: str
    tunes: bool = True
    fuses_parts: bool = True

    def takes_llm(self, model_given: bool) -> bool:
        """When a model is named: for an ``llm`` part (``--parts ...,llm``, or weights fitted with one)."""
        return model_given

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
        run = {p.label: open_method(shared, p.method, target, Request(p.overrides, model=request.model, llm=request.llm))
               for p in parts if not p.precomputed}
        if not run:
            raise UsageError("an ensemble needs at least one part that runs (its index shows the evidence)")
        index = next(iter(run.values())).index
        read = {p.label: Opened(PrecomputedScorer(Path(files[p.label]), p.label), index,
                                {"file": Path(files[p.label]).name, "sources": {"file": "--predictions"}})
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
                                      str(chosen["best_part"]), priors)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise OpenQAError(f"{path}: unreadable ensemble record ({type(exc).__name__}: {exc}); rerun `openqa tune`") from None
        if len(fitted.parts) != len(fitted.weights) or not fitted.parts or fitted.best_part not in fitted.parts:
            raise OpenQAError(f"{path}: unreadable ensemble record (parts and weights differ); rerun `openqa tune`")
        if any(label not in fitted.parts or not all(0 < p <= 1 for p in prior.values())
               for label, prior in fitted.letter_priors.items()):
            raise OpenQAError(f"{path}: unreadable ensemble record (a letter prior of no part, or not a probability); "
                              "rerun `openqa tune`")
        return fitted, where

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        fitted, where = self.fitted(ctx, target, request)
        labels = frozenset(label for label, _ in request.predictions)
        if request.parts and tuple(Part.parse(p, labels).label for p in request.parts) != fitted.parts:
            raise OpenQAError(f"the {target.dataset} ensemble was fitted over {', '.join(fitted.parts)}: "
                              f"run openqa tune --method ensemble --dataset {target.dataset} --parts ... to fit others")
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
        best = EnsembleSettings(tuple(opened), weights, ENSEMBLE_L2, best_part, priors)
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
    features, answers = [], []
    for per_part in zip(*scored.values()):
        letters = list(per_part[0].scores)
        if per_part[0].question.answer_idx in letters:
            features.append(scorer.logits(per_part))
            answers.append(letters.index(per_part[0].question.answer_idx))
    return features, answers


def _preset(exam: str) -> QueryParams:
    """The paper's Table B.13 query parameters for ``exam`` (usmle, mcmle or twmle)."""
    if exam not in QUERY_PRESETS:
        raise UsageError(f"unknown exam {exam!r}: choose one of {sorted(QUERY_PRESETS)}")
    return QUERY_PRESETS[exam]


def _needs(index: Index, kinds: tuple[type[IndexT], ...], what: str) -> IndexT:
    """``index``, refused when it is of another engine than the method reads."""
    if not isinstance(index, kinds):
        raise OpenQAError(what)
    return index


def _ir_custom(index: Index, exam: str, settings: IRSettings) -> IRScorer:
    """IR-Custom: the paper's re-weighted BM25 with its per-exam query parameters (Table B.13)."""
    engine = _needs(index, (CustomBM25,), "ir-custom needs the custom engine's index (openqa index --engine custom)")
    return IRScorer(engine, settings, replace(_preset(exam), avg_len=settings.avg_ql))


def _paper_query_params(exam: str) -> tuple[dict[str, Any], str]:
    """IR-Custom's fixed query-side parameters for ``exam`` and where they come from."""
    preset = _preset(exam)
    return {"kq": preset.kq, "bq": preset.bq}, f"paper Table B.13 ({exam})"


def _ir_es(index: Index, exam: str, settings: IRSettings) -> IRScorer:
    """IR-ES: the engine's own BM25 (Lucene or Elasticsearch), question + option queries."""
    engine = _needs(index, (LuceneBM25, ElasticBM25), "ir-es needs an off-the-shelf engine: --engine lucene or --engine elasticsearch")
    return IRScorer(engine, settings)


def _dense(index: Index, exam: str, settings: IRSettings) -> IRScorer:
    """Dense: the IR scorer over embedding search (question part + option, top-N aggregate)."""
    engine = _needs(index, (DenseIndex,), "dense needs the dense index: openqa index --engine dense")
    return IRScorer(engine, settings)


def _pmi(index: Index, exam: str, settings: IRSettings) -> PMIScorer:
    """PMI over the positional index (only the settings' query mode applies)."""
    positional = _needs(index, (PositionalIndex,), "pmi needs the positional index: openqa index --engine pmi")
    return PMIScorer(positional, settings)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        IndexMethod(name="ir-custom", summary="the paper's re-weighted BM25 (Appendix B)", engine="custom",
                    make=_ir_custom, tuner=tune_ir, fixed=_paper_query_params, uses=("top_n", "aggregate", "query", "avg_ql")),
        IndexMethod(name="ir-es", summary="off-the-shelf BM25 (Lucene, or --engine elasticsearch)", engine="lucene",
                    make=_ir_es, tuner=tune_ir),
        IndexMethod(name="pmi", summary="PMI of question and option n-grams", engine="pmi",
                    make=_pmi, tuner=tune_query_mode, retrieves=False, uses=("query",)),
        IndexMethod(name="dense", summary="sentence-embedding search (FAISS)", engine="dense", make=_dense, tuner=tune_ir),
        FusedMethod(name="hybrid", summary="ir-custom and dense option scores fused", parts=("ir-custom", "dense"), extra="dense"),
        ReaderMethod(name="reader", summary="a reader trained by openqa train (with --model CHECKPOINT)", extra="readers"),
        LLMMethod(name="llm", summary="an instruction model reading the evidence (with --model; see --evidence, --scoring)",
                  extra="llm"),
        EnsembleMethod(name="ensemble", summary="training-free methods (or --parts) combined by weights fitted on dev"),
    )
}


def method(name: str) -> Method:
    """The method registered under ``name``, or an error listing the known ones."""
    if name not in METHODS:
        raise UsageError(f"unknown method {name!r}: choose one of {', '.join(METHODS)}")
    return METHODS[name]


def calibration_key(name: str, request: Request = Request()) -> str:
    """What a method's calibration is filed under: its name, and what sets a run of it apart (an
    LLM's model and settings, a reader's checkpoint), since each of those has probabilities of its own."""
    return "-".join([name, *method(name).variant(request)])


def open_method(ctx: Context, name: str, target: Exam, request: Request = Request(), calibrated: bool = True) -> Opened:
    """The method ``name`` opened for ``target`` (see ``Method.open``), with the probabilities
    fitted on ``target.dataset`` dev (``openqa tune``; temperature 1 when none is found, which its
    settings say); refused in one line when ``request`` lacks what it needs (``Method.needs``).
    ``calibrated`` False leaves the probabilities out (temperature 1): for ``openqa tune``, which is
    about to fit them, and whose new settings no longer match the calibration it replaces."""
    m = method(name)
    m.require(request)
    if (request.predictions or request.ensemble) and not m.fuses_parts:
        raise UsageError(f"--predictions and --ensemble apply to --method ensemble, not {name}")
    engine = request.engine or m.engine
    with needs(f"method {name}", m.extra or (engine_class(engine).extra if engine else None)):
        opened = m.open(ctx, target, request)
    if not calibrated:
        return opened
    calibration = load_calibration(calibration_key(name, request), target.dataset, ctx.settings.tuned_dir(), ctx.corpus)
    if calibration is None:
        calibration = uncalibrated(opened.scorer.scale)
        where = f"none fitted for {target.dataset}: temperature 1 (run openqa tune --method {name} --dataset {target.dataset})"
    else:
        differ = {k: v for k, v in calibration.settings.items() if k in FIRST_PART_KEYS and opened.settings.get(k) != v}
        where = calibration.source + (f" (fitted with {', '.join(f'{k} {v}' for k, v in differ.items())})" if differ else "")
    settings = {**opened.settings, "probabilities": calibration.describe() if calibration.n else "uncalibrated",
                "sources": {**opened.settings["sources"], "probabilities": where}}
    return replace(opened, settings=settings, calibration=calibration)


def open_retrieving(ctx: Context, name: str, target: Exam, query: str | None = None) -> Opened:
    """The method ``name`` opened to find evidence (dev-tuned; ``query`` overrides its query mode):
    its ``retriever`` searches each option's paragraphs; a method that retrieves none is refused."""
    if not method(name).retrieves:
        raise OpenQAError(f"{name} does not retrieve paragraphs; use one of "
                          f"{', '.join(n for n, m in METHODS.items() if m.retrieves)} as the retriever")
    return open_method(ctx, name, target, Request(Overrides(query=query)))


def open_retriever(ctx: Context, name: str, target: Exam, query: str | None = None) -> IRScorer:
    """An IR scorer (dev-tuned; ``query`` overrides its query mode) whose retrieval feeds a reader."""
    retriever = open_retrieving(ctx, name, target, query).retriever
    assert retriever is not None  # open_retrieving refuses a method that retrieves nothing
    return retriever
