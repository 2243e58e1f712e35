"""The shape every method shares: what a command asks of it (``Request``, ``Overrides``), what it
gives back opened (``Opened``), and the ``Method`` interface the registry holds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from openqa.config import DEFAULT_METHOD as DEFAULT_METHOD
from openqa.corpus.sources import check_name  # the default method, named beside the registry
from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.evaluate.calibration import (
    IN_SAMPLE,
    Calibration,
    uncalibrated,
)
from openqa.languages import LANGS
from openqa.llm.settings import LLMSettings
from openqa.retrieval.base import Index
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ir import IRScorer, IRSettings, question_query
from openqa.tuning import (
    resolve_settings,
)
from openqa.workspace import Context, Exam

#: The scorer an ``IndexMethod`` makes (IR-Custom's, IR-ES's and dense's an ``IRScorer``, PMI's a ``PMIScorer``).
ScorerT = TypeVar("ScorerT", bound=OptionScorer)
#: The kind of index a method reads (``_needs``).
IndexT = TypeVar("IndexT", bound=Index)
#: A dev search: (a maker of the method's scorer for given settings, dev questions, query modes)
#: -> (the best settings, the grid's rows).
Tuner = Callable[[Callable[[IRSettings], ScorerT], Sequence[Question], Sequence[str]], tuple[IRSettings, list[dict[str, Any]]]]

#: Settings a fused record takes from its first part (its own tuned record holds only the fusion).
FIRST_PART_KEYS = ("top_n", "aggregate", "query")


@dataclass(frozen=True)
class Limits:
    """What one request to a method may ask of a server: characters of question and options together,
    and seconds from arriving to answered (queueing included). How heavy a request is, the method's
    ``Cost`` says (``Method.estimate``)."""

    max_chars: int
    seconds: float


#: The limits of a method that searches an inverted or vector index once per option (under half a
#: second at 20,000 characters).
SEARCH_LIMITS = Limits(20_000, 15.0)
#: PMI counts co-occurrences of every question n-gram with every option n-gram in windows of the positional
#: index: 4 Chinese options of 4,000 characters took 2.9 s here. An ensemble runs PMI among its parts
#: (every language's default parts), so it takes these limits: a request that could never finish in
#: its time is refused at once.
PMI_LIMITS = Limits(6_000, 15.0)


@dataclass(frozen=True)
class Rate:
    """What one question costs a method in one language: ``fixed`` seconds, plus ``per_unit`` seconds
    per unit of its work (``Method.work_units``)."""

    lang: str
    fixed: float
    per_unit: float


#: Estimated seconds above which a question (or a search) is heavy work: a server shares heavy requests
#: among at most half its workers (``openqa.serve``); every US and Mainland test question is light for
#: IR-Custom and PMI (``bench-costs.json``, ``test_questions``).
HEAVY_SECONDS = 0.5


@dataclass(frozen=True)
class Estimate:
    """What scoring a question (or running a search) is estimated to cost before it runs, as
    ``openqa serve`` weighs its requests: the method's work ``units`` (IR methods: the index terms
    of their queries; PMI: its question n-gram x option n-gram pairs; an LLM: its prompt tokens; an
    ensemble: its parts' estimated seconds) and the ``seconds`` they take at the rates
    ``scripts/benchmarks/bench_costs.py`` fitted on a 2-core machine (one thread)."""

    units: float
    seconds: float

    def __post_init__(self) -> None:
        """Refuse units or seconds that are not finite numbers of 0 or more (one line)."""
        from openqa import arguments as arg

        for name in ("units", "seconds"):
            arg.number(name, getattr(self, name), 0)

    @property
    def heavy_seconds(self) -> float:
        """The estimated seconds above which work is heavy (``HEAVY_SECONDS``)."""
        return HEAVY_SECONDS

    @property
    def heavy(self) -> bool:
        """Whether a server weighs it as heavy: estimated at over ``heavy_seconds``."""
        return self.seconds > HEAVY_SECONDS


@dataclass(frozen=True)
class Cost:
    """How long a method takes on one question, estimated from its work before it runs: a ``Rate``
    per language, fitted by ``scripts/benchmarks/bench_costs.py`` on a quiet machine
    (``eval/results/benchmarks/bench-costs.json``). A language without a rate of its own takes the
    costliest of the others."""

    rates: tuple[Rate, ...]

    def estimate(self, lang: str, units: float) -> Estimate:
        """The estimate of ``units`` of work in ``lang``."""
        rates = [r for r in self.rates if r.lang == lang] or self.rates
        return Estimate(units, max(r.fixed + r.per_unit * units for r in rates))


def query_terms(index: Index, queries: Sequence[str]) -> int:
    """The index terms of ``queries``, summed: an engine reads each term's postings once per query,
    so this is the work of searching them."""
    tokenizer = index.tokenizer
    return sum(len(tokenizer.tokenize(tokenizer.prepare_query(query))) for query in queries)


#: IR-Custom's cost per query term of its option queries (with the evidence paragraphs of an answer),
#: also taken by the IR methods whose engines were not measured (IR-ES, dense, a reader's retrieval,
#: the bank): ``bench-costs.json`` (``fits.ir_custom_en``, ``fits.ir_custom_zh``).
IR_COST = Cost((Rate("en", 0.00126, 1.45e-06), Rate("zh", 0.00112, 5.5e-06)))
#: One search's (``/v1/search``) cost per query term: ``bench-costs.json`` (``fits.search_en``, ``fits.search_zh``).
SEARCH_COST = Cost((Rate("en", 0.000114, 1.38e-06), Rate("zh", 0.000351, 3.03e-06)))
#: The cost of work already counted in estimated seconds (an ensemble's: its parts').
SECONDS = Cost(tuple(Rate(lang, 0.0, 1.0) for lang in LANGS))
#: PMI's cost per (question n-gram, option n-gram) pair: ``bench-costs.json`` (``fits.pmi_en``, ``fits.pmi_zh``;
#: the issue's 1,960-character Chinese question, 1.6 million pairs, took 4.3 s there and is estimated at 6.2 s).
PMI_COST = Cost((Rate("en", 0.00185, 1.73e-06), Rate("zh", 0.000797, 3.84e-06)))


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
    #: Files of solved questions added to the exam's own in the bank method's bank (``--bank``).
    banks: tuple[str, ...] = ()
    #: Whether a ``--bank`` file may hold questions being scored (``--allow-bank-overlap``; their
    #: copies are left out all the same, and counted): refused otherwise (``checked_overlap``).
    allow_bank_overlap: bool = False

    def __post_init__(self) -> None:
        if self.ensemble is not None:  # it names the settings file of the weights: checked as a corpus name
            check_name(self.ensemble, "ensemble name", "--ensemble")
        for label, _ in self.predictions:  # it names a part in records, reports' tables and the fit: checked alike
            check_name(label, "ensemble part label", "--predictions PART=FILE")


def refuse_bank_flags(request: Request, name: str) -> None:
    """Refuse ``--bank`` (or ``--allow-bank-overlap``) given to the method ``name``, which reads no
    solved questions: the file would never be opened, and the run filed as if it had been."""
    if request.banks or request.allow_bank_overlap:
        raise UsageError(f"{'--bank' if request.banks else '--allow-bank-overlap'} applies to a method that reads solved "
                         f"questions (bank, llm with --demonstrations, an ensemble with a bank part); {name} reads none")


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
    #: What one request to the method may ask of a server (``openqa serve``).
    limits: Limits = SEARCH_LIMITS
    #: How pages name the method for a person (default: its name).
    display_name: str = ""
    #: How long a question takes it, from its ``work_units`` (``estimate``; a server weighs requests by it).
    cost: Cost = IR_COST

    @property
    def shown_name(self) -> str:
        """The method's name for a person."""
        return self.display_name or self.name

    def work_units(self, opened: Opened, question: Question, lang: str) -> float:
        """How much work scoring ``question`` with ``opened`` is, in the units of ``cost``: by default
        an IR method's, the index terms of its option queries (question part, then option), summed.
        No term spans the space between the two parts, so the question part is read once."""
        mode = opened.retriever.settings.query if opened.retriever is not None else "full"
        asked = query_terms(opened.index, [question_query(question, mode, lang)])
        return len(question.options) * asked + query_terms(opened.index, list(question.options.values()))

    def estimate(self, opened: Opened, question: Question, lang: str) -> Estimate:
        """What scoring ``question`` with ``opened`` is estimated to cost (its ``work_units`` at its ``cost``)."""
        return self.cost.estimate(lang, self.work_units(opened, question, lang))

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

    def uses_bank(self, request: Request) -> bool:
        """Whether the method, opened with ``request``, reads the exam's solved questions (the bank
        method; an LLM shown demonstrations; an ensemble with such a part), so ``--bank`` files
        mean something to it: none by default."""
        return False

    def require(self, request: Request) -> None:
        """Refuse in one line a ``request`` that lacks what the method needs, or gives ``--bank``
        files to a method that reads no bank (silently ignored they would mislead)."""
        if not self.ready(request):
            raise OpenQAError(f"--method {self.name} needs {self.needs}")
        if not self.uses_bank(request):
            refuse_bank_flags(request, self.name)

    def reads(self, lang: str, request: Request = Request()) -> tuple[tuple[str, str], ...]:
        """The (language, engine) indexes the method reads when opened with ``request`` (a fused
        method: its parts'; a reader: none it can name before its checkpoint is read): by default its engine's."""
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

