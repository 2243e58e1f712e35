"""Methods over one index or several: the training-free scorers (IR-Custom, IR-ES, dense, PMI),
their fusion, a trained reader and an LLM reader, with the makers that build each scorer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Generic, Sequence, cast

from openqa.config import DEFAULT_METHOD as DEFAULT_METHOD  # the default method, named beside the registry
from openqa.config import prefixed
from openqa.data import Question
from openqa.errors import OpenQAError, UsageError
from openqa.languages import language
from openqa.methods.base import (
    FIRST_PART_KEYS,
    IR_COST,
    SEARCH_LIMITS,
    Cost,
    IndexT,
    Limits,
    Method,
    Opened,
    Rate,
    Request,
    ScorerT,
    Tuner,
)
from openqa.methods.registry import method, open_method, open_retriever, open_retrieving
from openqa.retrieval.base import Index, SearchEngine
from openqa.retrieval.custom_bm25 import QUERY_PRESETS, CustomBM25, QueryParams
from openqa.retrieval.dense import DenseIndex
from openqa.retrieval.elastic import ElasticBM25
from openqa.retrieval.hybrid import FusedEngine, Fusion
from openqa.retrieval.lucene import LuceneBM25
from openqa.retrieval.positional import PositionalIndex
from openqa.scorers.hybrid import HybridScorer
from openqa.scorers.ir import IRScorer, IRSettings
from openqa.scorers.pmi import PMIScorer
from openqa.scorers.query import TUNED_QUERY_MODES
from openqa.tuning import (
    tune_fusion,
)
from openqa.workspace import Context, Exam


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
    limits: Limits = SEARCH_LIMITS
    display_name: str = ""
    cost: Cost = IR_COST
    #: Its work units (``Method.work_units``) where they are not an IR method's query terms (PMI's pairs).
    work: Callable[[Opened, Question, str], float] | None = None

    def takes(self, setting: str) -> bool:
        return setting in self.uses

    def work_units(self, opened: Opened, question: Question, lang: str) -> float:
        return self.work(opened, question, lang) if self.work is not None else super().work_units(opened, question, lang)

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
    display_name: str = ""

    def takes(self, setting: str) -> bool:
        return any(method(part).takes(setting) for part in self.parts)

    def work_units(self, opened: Opened, question: Question, lang: str) -> float:
        """Each part runs the option queries: theirs, once per part."""
        return len(self.parts) * super().work_units(opened, question, lang)

    def reads(self, lang: str, request: Request = Request()) -> tuple[tuple[str, str], ...]:
        """Its parts' indexes."""
        return tuple(sorted({key for part in self.parts for key in method(part).reads(lang, request)}))

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        if request.engine:
            raise OpenQAError(f"--engine does not apply to {self.name}: it reads each part's own index ({', '.join(self.parts)})")
        chosen, record, sources = self.settings(ctx, target, request.overrides, lambda key: True)
        first, second = (open_method(ctx, part, target, Request(request.overrides)) for part in self.parts)
        # the parts (ir-custom, dense) are index methods that retrieve: IR scorers over search engines
        scorer = HybridScorer(cast(IRScorer, first.scorer), cast(IRScorer, second.scorer), Fusion(chosen.fusion, chosen.weight))
        for key in FIRST_PART_KEYS:  # the fused record shows the first part's retrieval settings
            record[key], sources[key] = first.settings[key], prefixed(f"{self.parts[0]}: ", first.settings["sources"][key])
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
    #: One prompt per order of the options: a 1.5B GGUF model on one CPU thread takes 10-30 s a prompt with
    #: evidence (requests queue behind each other there), a GPU server about a second.
    limits: Limits = Limits(20_000, 600.0)
    #: The fastest model measured (``bench-llm.json``: SmolLM2-135M as GGUF on one CPU thread) took 903 s for
    #: 400 closed-book questions (letters scoring) and read 197 prompt tokens/s: a question is estimated at
    #: 903 / 400 s, plus 1 / 197 s per token of its question, options and evidence (both languages). A
    #: larger model is slower: every LLM request is heavy.
    cost: Cost = Cost((Rate("en", 903 / 400, 1 / 197),))

    def ready(self, request: Request) -> bool:
        return request.llm is not None

    def work_units(self, opened: Opened, question: Question, lang: str) -> float:
        """Prompt tokens (``LLMScorer.prompt_tokens_estimate``)."""
        from openqa.llm.scorer import LLMScorer

        return cast(LLMScorer, opened.scorer).prompt_tokens_estimate(question)

    def takes_llm(self, model_given: bool) -> bool:
        """Always, so that a missing ``--model`` is said in one line."""
        return True

    def uses_bank(self, request: Request) -> bool:
        """When it is shown demonstrations (drawn from the bank)."""
        return request.llm is not None and request.llm.demonstrations > 0

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
                                           evidence.settings if evidence else None, request.banks)
        return Opened(scorer, index, settings)

    def variant(self, request: Request) -> list[str]:
        return [request.llm.variant()] if request.llm else []


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


def ir_custom_scorer(index: Index, exam: str, settings: IRSettings) -> IRScorer:
    """IR-Custom: the paper's re-weighted BM25 with its per-exam query parameters (Table B.13)."""
    engine = _needs(index, (CustomBM25,), "ir-custom needs the custom engine's index (openqa index --engine custom)")
    return IRScorer(engine, settings, replace(_preset(exam), avg_len=settings.avg_ql))


def paper_query_params(exam: str) -> tuple[dict[str, Any], str]:
    """IR-Custom's fixed query-side parameters for ``exam`` and where they come from."""
    preset = _preset(exam)
    return {"kq": preset.kq, "bq": preset.bq}, f"paper Table B.13 ({exam})"


def ir_es_scorer(index: Index, exam: str, settings: IRSettings) -> IRScorer:
    """IR-ES: the engine's own BM25 (Lucene or Elasticsearch), question + option queries."""
    engine = _needs(index, (LuceneBM25, ElasticBM25), "ir-es needs an off-the-shelf engine: --engine lucene or --engine elasticsearch")
    return IRScorer(engine, settings)


def dense_scorer(index: Index, exam: str, settings: IRSettings) -> IRScorer:
    """Dense: the IR scorer over embedding search (question part + option, top-N aggregate)."""
    engine = _needs(index, (DenseIndex,), "dense needs the dense index: openqa index --engine dense")
    return IRScorer(engine, settings)


def pmi_pairs(opened: Opened, question: Question, lang: str) -> float:
    """PMI's work units: its scorer's (question n-gram, option n-gram) pairs (``PMIScorer.pairs``)."""
    return cast(PMIScorer, opened.scorer).pairs(question)


def pmi_scorer(index: Index, exam: str, settings: IRSettings) -> PMIScorer:
    """PMI over the positional index (only the settings' query mode applies)."""
    positional = _needs(index, (PositionalIndex,), "pmi needs the positional index: openqa index --engine pmi")
    return PMIScorer(positional, settings)

