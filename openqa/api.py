"""openqa's Python API: search the textbooks, solve questions, build indexes, evaluate and tune, in
a few lines, with the same results as the commands (which are written over these functions).

>>> from openqa import Solver
>>> solver = Solver.open("ir-custom", lang="en", data_dir="../shared/medqa/data_clean")
>>> solver.answer("Which drug irreversibly inhibits cyclooxygenase?", {"A": "Ceftriaxone", "B": "Aspirin"}).prediction
'B'

- ``Searcher``: a search engine over one index (opened from a language and engine, a corpus name,
  or an index folder); ``search(query, k)`` gives ranked ``SearchHit``s (paragraph id, book,
  score, text), ``search([...], k)`` one list per query, ``batch_search`` the same as arrays.
- ``Solver``: a method with its dev-tuned settings (or yours); ``answer(question, options)`` gives
  an ``Answer`` whose ``to_dict()`` is exactly what ``openqa answer --json`` prints (the record of
  ``openqa.pipeline.answer_record``, the function the HTTP server answers with too; fields that
  later versions add to it appear here unchanged).
- ``build_index``, ``run_eval``, ``tune``: the records ``openqa index``, ``eval`` and ``tune``
  write, typed (``to_dict()`` gives the record).

Where things are (data, indexes, your tuned settings) is a ``Workspace``; every function also
takes its fields as keywords, each falling back to its environment variable (``OPENQA_DATA``,
``OPENQA_INDEXES``...) as the commands do. Errors are ``openqa.errors.OpenQAError`` and its
subclasses (a missing optional package: ``MissingExtraError``, naming the extra); nothing is
printed, and no progress bar is shown unless ``progress=True``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence, cast, overload

from openqa import arguments as arg
from openqa.corpus.sources import user_corpus
from openqa.errors import IndexDamagedError, OpenQAError, UsageError
from openqa.extras import needs
from openqa.progress import shown
from openqa.retrieval.base import SearchEngine

if TYPE_CHECKING:
    import numpy as np

    from openqa.data import Question
    from openqa.llm.settings import LLMSettings
    from openqa.methods import Opened, Request
    from openqa.pipeline import EvalRequest
    from openqa.retrieval.base import Index
    from openqa.scorers.base import OptionScores
    from openqa.workspace import Context, Exam

#: Paragraphs per query ``search`` returns when no ``k`` is given, and the most it may ask for.
DEFAULT_K = 10
MAX_K = 10_000


@dataclass(frozen=True)
class Workspace:
    """Where openqa works and how its indexes were built: each field as the flag of the same name
    (None: its environment variable, else the default; see ``openqa.config.Settings``)."""

    data_dir: str | Path | None = None
    index_dir: str | Path | None = None
    models_dir: str | Path | None = None
    settings_dir: str | Path | None = None
    results_dir: str | Path | None = None
    es_url: str | None = None
    encoder: str | None = None
    faiss_index: str | None = None
    ngram: int | None = None
    zh_mode: str | None = None
    corpus: str | None = None

    def __post_init__(self) -> None:
        for name in ("data_dir", "index_dir", "models_dir", "settings_dir", "results_dir"):
            arg.path(name, getattr(self, name))
        for name in ("es_url", "encoder", "faiss_index", "corpus"):
            arg.optional_text(name, getattr(self, name))
        arg.optional_whole("ngram", self.ngram, 1, 2)
        arg.optional_one_of("zh_mode", self.zh_mode, ("word", "char"))

    def context(self, notify: Callable[[str], None] | None = None, check_settings: bool = True) -> Context:
        """The ``Context`` the layers below take; ``notify`` receives one-line notes (of work done on
        the caller's behalf, such as a quick index built first; default: none is said);
        ``check_settings``: a settings folder asked for (by field or environment) must exist when
        read, as on the command line (a typo would silently fall back to the shipped settings)."""
        from openqa.config import Settings
        from openqa.retrieval.base import EngineOptions
        from openqa.workspace import Context

        s = Settings.resolve(self.data_dir, self.index_dir, self.models_dir, self.es_url, self.settings_dir, self.results_dir,
                             check_settings=check_settings)
        options = EngineOptions(connection=s.es_url, encoder=self.encoder, models_dir=s.models_dir,
                                faiss_index=self.faiss_index or "flat")
        return Context(s, options, self.ngram, self.zh_mode, corpus=self.corpus, **({"notify": notify} if notify else {}))

    @classmethod
    def of(cls, workspace: Workspace | None = None, **given: Any) -> Workspace:
        """``workspace`` (default: all from the environment) with the non-None ``given`` fields replaced."""
        if workspace is not None and not isinstance(workspace, Workspace):
            raise UsageError(f"workspace must be a Workspace, not {type(workspace).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise UsageError(f"unknown setting {unknown[0]!r}: choose from {', '.join(sorted(known))}")
        base = workspace or cls()
        return cls(**{**{f.name: getattr(base, f.name) for f in fields(cls)},
                      **{k: v for k, v in given.items() if v is not None}})


# --------------------------------------------------------------------------------------- search


class SearchHit(NamedTuple):
    """A retrieved paragraph: its id, book, score and text, and its rank (1 = best). A named tuple:
    immutable, and made fast enough for runs of millions of hits."""

    id: str
    book: str
    score: float
    text: str
    rank: int

    def to_dict(self) -> dict[str, Any]:
        """The hit as ``POST /v1/search`` and ``openqa search --json`` give it."""
        return {"id": self.id, "book": self.book, "score": self.score, "text": self.text, "rank": self.rank}


@dataclass(frozen=True)
class BatchHits:
    """Hits of many queries: ``hits[i]`` for query ``qids[i]``, best first; ``ids()`` and ``scores()``
    give them as ``(queries, k)`` arrays (padded with "" and NaN where a query found fewer),
    ``run()`` as ``{qid: {doc id: score}}`` (ranx's and pytrec_eval's run), ``write_trec`` as a TREC
    run file with its settings beside it; ``params`` are the engine's query-side parameters used."""

    hits: list[list[SearchHit]]
    k: int
    qids: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def ids(self) -> np.ndarray:
        import numpy as np

        out = np.full((len(self.hits), self.k), "", dtype=object)
        for row, hits in enumerate(self.hits):
            out[row, : len(hits)] = [h.id for h in hits]
        return out

    def scores(self) -> np.ndarray:
        import numpy as np

        out = np.full((len(self.hits), self.k), np.nan, dtype=np.float32)
        for row, hits in enumerate(self.hits):
            out[row, : len(hits)] = [h.score for h in hits]
        return out

    def run(self) -> dict[str, dict[str, float]]:
        """Each query id's hits as ``{doc id: score}``."""
        return {qid: {h.id: h.score for h in hits} for qid, hits in zip(self.qids, self.hits)}

    def trec_lines(self, tag: str = "openqa") -> list[str]:
        """The hits as TREC run lines, ``qid Q0 docid rank score tag`` (``openqa.data.topics``)."""
        from openqa.data.topics import check_run_word, trec_lines

        check_run_word("run tag", tag)
        return [line for qid, hits in zip(self.qids, self.hits)
                for line in trec_lines(qid, [h.id for h in hits], [h.score for h in hits], tag)]

    def write_trec(self, path: str | Path, tag: str = "openqa", metadata: dict[str, Any] | None = None) -> Path:
        """Write the TREC run to ``path`` (atomically; a device or FIFO is written through, never
        replaced) and, beside a regular file, ``<path>.json``: the engine's parameters, ``k``, the
        query count, the openqa version and ``metadata``. Returns the run's path."""
        import json

        from openqa.evaluate.results import run_record, write_output

        target = arg.path("path", path)
        if target is None:
            raise UsageError("path must name the run file to write, not None")
        text = "".join(line + "\n" for line in self.trec_lines(tag))
        meta = {"k": self.k, "queries": len(self.qids), "tag": tag, "params": self.params, **(metadata or {}), **run_record()}
        return write_output(target, text, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "qids": self.qids, "params": self.params,
                "hits": [[h.to_dict() for h in hits] for hits in self.hits]}


def check_queries(queries: Sequence[str], k: int) -> None:
    """Refuse a query that is not text or is empty, or an impossible ``k``, in one line."""
    arg.whole("k", k, 1, MAX_K)
    for number, query in enumerate(queries, start=1):
        if not isinstance(query, str):
            raise UsageError(f"query {number} is a {type(query).__name__}, not text")
        if not query.strip():
            raise UsageError("empty query: give the text to search for" + (f" (query {number})" if len(queries) > 1 else ""))


def search_hits(engine: Index, queries: Sequence[str], k: int, params: Any = None, threads: int | None = None,
                ) -> list[list[SearchHit]]:
    """The top ``k`` paragraphs of ``engine`` for each query, best first (the engine's own scoring
    with the query-side ``params``, default its own), all through the engine's batched search on
    ``threads`` threads where it has them. A query's hits never depend on the queries beside it
    (IR-Custom's avgQL is a fixed parameter or the query's own length; an encoder's vectors do
    not depend on its batch). ``Searcher``, ``openqa search`` and ``POST /v1/search`` all search
    through here."""
    if not isinstance(engine, SearchEngine):
        raise UsageError(f"the {engine.name} index does not search paragraphs: use custom, lucene, elasticsearch or dense")
    check_queries(queries, k)
    store = engine.paragraphs
    out = []
    for hits in engine.search(list(queries), k, params, threads=threads):
        found = []
        for rank, hit in enumerate(hits, start=1):
            p = store[hit.index]
            found.append(SearchHit(p.pid, p.book, round(float(hit.score), 4), p.text, rank))
        out.append(found)
    return out


def open_folder(folder: str | Path, workspace: Workspace | None = None) -> Index:
    """The index in ``folder`` (any name or place), opened as its manifest says it was built: its
    files are checked against the manifest as ``Index.load`` always does."""
    import json

    from openqa.retrieval.manifest import MANIFEST, read_manifest
    from openqa.retrieval.registry import build_hint, engine_class

    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        lang, engine, tokenizer = manifest["lang"], manifest["engine"], manifest["tokenizer"]
    except (OSError, ValueError, TypeError, KeyError):
        read_manifest(folder, "openqa index --lang LANG --engine ENGINE")  # says what is wrong
        raise IndexDamagedError(f"{folder / MANIFEST} does not say the index's language, engine and tokenizer: "
                                "rebuild it with openqa index") from None
    cls = engine_class(str(engine))
    expected = {key: manifest[key] for key in ("lang", "corpus", "tokenizer", "segmentation") if key in manifest}
    flags = {k: v for k, v in tokenizer.items() if k in cls.tokenizers.get(lang, {}) or k == "mode"}  # what index's flags set
    hint = build_hint(lang, engine, flags, manifest.get("corpus"), manifest.get("corpus_source"))
    with needs(f"engine {engine}", cls.extra):
        return cls.load(folder, expected, hint, Workspace.of(workspace).context().options)


class Searcher:
    """Ranked paragraphs of one index for free-text queries (as Pyserini's ``LuceneSearcher``)."""

    def __init__(self, engine: Index) -> None:
        if not isinstance(engine, SearchEngine):
            raise UsageError(f"the {engine.name} index does not search paragraphs: use custom, lucene, elasticsearch or dense")
        self.engine = engine
        self._params: Any = None  # the engine's defaults

    @classmethod
    def open(cls, lang: str = "en", engine: str = "custom", *, corpus: str | None = None,
             workspace: Workspace | None = None, **where: Any) -> Searcher:
        """The ``lang`` index of ``engine`` over the MedQA textbooks, or over a corpus indexed with
        ``build_index(..., corpus=PATH, name=corpus)``; ``where`` are ``Workspace`` fields. A missing
        custom index of the textbooks is built first when ``data_dir`` holds them (seconds)."""
        ctx = Workspace.of(workspace, corpus=corpus, **where).context()
        return cls(ctx.open(_lang(lang), _engine(engine)))

    @classmethod
    def from_folder(cls, folder: str | Path, workspace: Workspace | None = None) -> Searcher:
        """The index in ``folder`` (as ``openqa index`` wrote it, wherever it now is)."""
        found = arg.path("folder", folder)
        if found is None:
            raise UsageError("folder must name an index folder, not None")
        return cls(open_folder(found, workspace))

    @property
    def manifest(self) -> dict[str, Any]:
        """How the index was built (engine, corpus, tokenizer, paragraphs...)."""
        return self.engine.manifest

    @property
    def params(self) -> dict[str, Any]:
        """The engine's query-side parameters searches use (IR-Custom: kq, bq and avg_ql, None
        meaning each query's own length; other engines have none), as ``set_params`` sets them."""
        return self.engine.query_params(self._params)

    def set_params(self, **values: Any) -> None:
        """Set the engine's query-side parameters for later searches, as Pyserini's ``set_bm25``
        (IR-Custom: ``kq`` >= 0, ``bq`` from 0 to 1, ``avg_ql`` > 0 or None); a parameter the engine
        has not is refused in one line."""
        self._params = self.engine.with_query_params(self._params, values)

    @overload  # a str is also a Sequence[str]: mypy calls them overlapping; a str matches this one first
    def search(self, query: str, k: int = DEFAULT_K) -> list[SearchHit]: ...  # type: ignore[overload-overlap]
    @overload
    def search(self, query: Sequence[str], k: int = DEFAULT_K) -> list[list[SearchHit]]: ...

    def search(self, query: str | Sequence[str], k: int = DEFAULT_K) -> list[SearchHit] | list[list[SearchHit]]:
        """The top ``k`` paragraphs for ``query``, best first; for a list of queries, one list each."""
        if isinstance(query, str):
            return search_hits(self.engine, [query], k, self._params)[0]
        return search_hits(self.engine, arg.texts("query", query), k, self._params)

    def batch_search(self, queries: Sequence[str], qids: Sequence[str] | None = None, k: int = DEFAULT_K,
                     threads: int = 1) -> BatchHits:
        """The hits of many queries with their ids (default "1", "2", ...), through the engine's
        batched search on ``threads`` threads (IR-Custom's kernel; other engines search their batches
        in turn); each query's hits are exactly those ``search`` gives it alone."""
        from openqa.data.topics import check_run_word

        queries = arg.texts("queries", queries)
        ids = [str(i) for i in range(1, len(queries) + 1)] if qids is None else arg.texts("qids", qids)
        if len(ids) != len(queries):
            raise UsageError(f"give one id per query: {len(ids)} ids for {len(queries)} queries")
        if len(set(ids)) != len(ids):
            raise UsageError("query ids must differ from each other")
        for qid in ids:
            check_run_word("query id", qid)
        arg.whole("threads", threads, 1, 256)
        return BatchHits(search_hits(self.engine, queries, k, self._params, threads), k, ids, self.params)


# --------------------------------------------------------------------------------------- solve


@dataclass(frozen=True)
class Answer:
    """One solved question: the prediction (None when no word of it is in the index), every option's
    score and evidence, the settings used with their sources; ``record`` is the whole of what
    ``openqa answer --json`` prints, and ``to_dict()`` returns it."""

    record: dict[str, Any]

    @property
    def prediction(self) -> str | None:
        return cast("str | None", self.record["prediction"])

    @property
    def scores(self) -> dict[str, float | None]:
        """Option letter -> score (None: no evidence), best first."""
        return {o["letter"]: o["score"] for o in self.record["options"]}

    @property
    def evidence(self) -> dict[str, list[dict[str, Any]]]:
        """Option letter -> its best evidence paragraphs (id, book, score, text, spans of matched words)."""
        return {o["letter"]: o["evidence"] for o in self.record["options"]}

    @property
    def settings(self) -> dict[str, Any]:
        """The settings used, with ``settings["sources"]`` saying where each came from."""
        return cast(dict[str, Any], self.record["settings"])

    @property
    def matched(self) -> bool:
        return cast(bool, self.record["matched"])

    @property
    def probabilities(self) -> dict[str, float | None]:
        """Option letter -> probability (calibrated on the exam's dev split where openqa tune fitted it)."""
        return {o["letter"]: o.get("probability") for o in self.record["options"]}

    @property
    def confidence(self) -> dict[str, Any]:
        """How sure the answer is: the prediction's ``probability``, its ``meaning`` in words, the
        calibration's source, and whether it ``abstained`` below a ``min_confidence``."""
        return cast(dict[str, Any], self.record.get("confidence", {}))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


class Solver:
    """A method ready to answer questions (as ``openqa answer`` opens it): its scorer, its index and
    its settings."""

    def __init__(self, opened: Opened, method: str, exam: Exam) -> None:
        self.opened = opened
        self.method = method
        self.exam = exam

    @classmethod
    def open(cls, method: str = "ir-custom", lang: str = "en", *, exam: str | None = None, top_n: int | None = None,
             aggregate: str | None = None, query: str | None = None, engine: str | None = None, model: str | None = None,
             llm: LLMSettings | None = None, corpus: str | None = None, workspace: Workspace | None = None,
             **where: Any) -> Solver:
        """The method ``method`` for ``lang`` questions scored as ``exam`` (default: usmle for en,
        mcmle for zh), with its dev-tuned settings (yours, else shipped) replaced by ``top_n``,
        ``aggregate``, ``query`` where given; ``engine`` another index, ``model`` a reader's
        checkpoint, ``llm`` the LLM reader's settings (``LLMSettings(model=...)``); ``where`` are
        ``Workspace`` fields."""
        from openqa.methods import Request
        from openqa.workspace import Exam

        overrides = _overrides(top_n, aggregate, query)
        method, engine, model = _method(method), _optional_engine(engine), arg.optional_text("model", model)
        exam = arg.optional_text("exam", exam)
        _llm(llm)
        if llm is None and method == "llm" and model is not None:
            from openqa.llm.settings import LLMSettings

            llm = LLMSettings(model=model)
        ctx = Workspace.of(workspace, corpus=corpus, **where).context()
        request = Request(overrides, engine, model, llm)
        return cls.from_context(ctx, method, Exam.resolve(lang=_lang(lang), exam=exam), request)

    @classmethod
    def from_context(cls, ctx: Context, method: str, exam: Exam, request: Request) -> Solver:
        """The method opened in ``ctx`` (what the CLI does with its flags)."""
        from openqa.methods import open_method

        return cls(open_method(ctx, method, exam, request), method, exam)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the method uses, with ``settings["sources"]``."""
        return self.opened.settings

    @property
    def index(self) -> Index:
        return self.opened.index

    def question(self, question: str, options: Mapping[str, str] | Sequence[str]) -> Question:
        """A question from its text and options (a letter -> text mapping, or texts lettered A, B, ...),
        checked as ``openqa answer`` checks it."""
        from openqa.data.pasted import make_question

        arg.text("question", question)
        if isinstance(options, (str, bytes)) or not isinstance(options, (Mapping, list, tuple)):
            raise UsageError(f"options must be a mapping of letters to texts or a list of texts, not {type(options).__name__}")
        if not isinstance(options, Mapping):
            options = {chr(ord("A") + i): text for i, text in enumerate(options)}
        return make_question(question, dict(options))

    def scores(self, question: Question) -> OptionScores:
        """The method's option scores of one ``Question`` (with the evidence of each option)."""
        from openqa.answer import solve

        return solve(self.opened.scorer, question)

    def answer(self, question: str | Question, options: Mapping[str, str] | Sequence[str] | None = None,
               evidence: int = 2, min_confidence: float | None = None) -> Answer:
        """Solve one question: ``options`` as letter -> text (or a list, lettered A, B, ...); or a
        ``Question`` alone. ``evidence`` paragraphs are kept per option (``--paragraphs``); below
        ``min_confidence`` (a probability) the answer abstains (``prediction`` None, with its best guess)."""
        from openqa.pipeline import answer_record

        asked = self._asked(question, options, evidence)
        return Answer(answer_record(self.opened, asked, evidence, arg.probability("min_confidence", min_confidence)))

    def text(self, question: Question, show: int = 2, evidence: int = 2, color: bool = False,
             min_confidence: float | None = None) -> tuple[str, bool]:
        """One solved question as ``openqa answer`` prints it for a person (the prediction, how sure
        it is, each option's probability and score, and the evidence of the ``show`` best options),
        and whether any of its words is in the index."""
        from openqa.answer import assess, render

        question = self._asked(question, None, evidence)
        arg.whole("show", show, 0)
        arg.flag("color", color)
        result = self.scores(question)
        sure = assess(result, self.opened.probabilities(result), self.opened.calibration, min_confidence)
        # evidence hits are rows of a search engine's paragraph store (an index without one gives none)
        return render(result, cast(SearchEngine, self.index), show, evidence, color, sure), result.matched

    def _asked(self, question: str | Question, options: Mapping[str, str] | Sequence[str] | None, evidence: int) -> Question:
        from openqa.data import Question

        arg.whole("evidence", evidence, 0)
        if not isinstance(question, Question):
            if options is None:
                raise UsageError("give the options with the question")
            question = self.question(question, options)
        return question


# --------------------------------------------------------------------------- index, eval, tune


@dataclass(frozen=True)
class Built:
    """An index ``build_index`` wrote: its folder, the seconds it took and its manifest."""

    folder: Path
    seconds: float
    manifest: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "seconds": self.seconds, "manifest": self.manifest}


def build_index(lang: str = "en", engine: str = "custom", *, corpus: str | Path | None = None, name: str | None = None,
                progress: bool = False, workspace: Workspace | None = None, **where: Any) -> Built:
    """Index the ``lang`` MedQA textbooks of ``data_dir`` with ``engine`` (``openqa index``), or your
    own ``corpus`` (a folder of .txt/.md books, or a JSON-lines file of passages in openqa's, MedRAG's,
    BEIR's or Pyserini's format), which other calls then open by ``name`` (default: its file name)."""
    from openqa.retrieval.manifest import read_manifest
    from openqa.retrieval.registry import build_index as build

    lang, engine, corpus, name = _lang(lang), _engine(engine), arg.path("corpus", corpus), arg.optional_text("name", name)
    arg.flag("progress", progress)
    if name is not None and corpus is None:
        raise UsageError("name names a corpus given with corpus=PATH")
    ctx = Workspace.of(workspace, **where).context()
    source = user_corpus(corpus, lang, name) if corpus is not None else None
    start = time.perf_counter()
    with shown(progress):
        folder = build(None if source else ctx.settings.require_data_dir(), ctx.settings.index_dir, lang, engine,
                       ctx.tokenizer(lang, engine), ctx.options, source)
    return Built(folder, round(time.perf_counter() - start, 3), read_manifest(folder, "openqa index"))


@dataclass(frozen=True)
class Evaluation:
    """What ``run_eval`` (``openqa eval``) wrote: the summary record (``to_dict()``), with the
    accuracy (0-100), its 95% CI and the question count at hand."""

    record: dict[str, Any]

    @property
    def accuracy(self) -> float:
        return cast(float, self.record["accuracy"])

    @property
    def n(self) -> int:
        return cast(int, self.record["n"])

    @property
    def ci95(self) -> tuple[float, float]:
        low, high = self.record["ci95"]
        return low, high

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


def run_eval(method: str = "ir-custom", dataset: str | None = None, *, split: str | None = None,
             questions: str | Path | None = None, lang: str | None = None, exam: str | None = None,
             limit: int | None = None, top_n: int | None = None, aggregate: str | None = None, query: str | None = None,
             engine: str | None = None, model: str | None = None, llm: LLMSettings | None = None,
             subset: str | None = None, progress: bool = False, workspace: Workspace | None = None,
             **where: Any) -> Evaluation:
    """Accuracy of ``method`` on a ``dataset`` split (default test) or a ``questions`` file, with the
    result files written under ``results_dir`` as ``openqa eval`` writes them."""
    from openqa.data.questions import DATASETS, SPLITS
    from openqa.pipeline import EvalRequest

    overrides = _overrides(top_n, aggregate, query)
    arg.flag("progress", progress)
    _llm(llm)
    request = EvalRequest(method=_method(method), dataset=arg.optional_one_of("dataset", dataset, DATASETS),
                          split=arg.optional_one_of("split", split, SPLITS), questions=arg.path("questions", questions),
                          lang=None if lang is None else _lang(lang), exam=arg.optional_text("exam", exam),
                          limit=arg.optional_whole("limit", limit, 1), engine=_optional_engine(engine),
                          model=arg.optional_text("model", model), overrides=overrides, llm=llm,
                          subset=arg.optional_text("subset", subset))
    return evaluate_request(Workspace.of(workspace, **where).context(), request, progress)


def evaluate_request(ctx: Context, request: EvalRequest, progress: bool = False, command: str | None = None) -> Evaluation:
    """``openqa.pipeline.evaluate`` of an ``EvalRequest`` in ``ctx``, typed (the CLI's path)."""
    from openqa.pipeline import evaluate as run

    with shown(progress):
        return Evaluation(run(ctx, request, progress=progress, command=command))


@dataclass(frozen=True)
class Tuning:
    """What ``tune`` (``openqa tune``) chose and recorded: the settings (none when only probabilities
    were fitted), the record with its dev grid and calibration (``to_dict()``), and the files written."""

    chosen: dict[str, Any] | None
    record: dict[str, Any]
    files: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


def tune(method: str = "ir-custom", dataset: str = "us", *, engine: str | None = None, parts: Sequence[str] | None = None,
         calibrate_only: bool = False, progress: bool = False, workspace: Workspace | None = None, **where: Any) -> Tuning:
    """Grid-search ``method``'s settings on ``dataset`` dev (an ensemble: fit its weights over
    ``parts``) and fit its probabilities there; record both in ``settings_dir``, where ``Solver`` and
    ``run_eval`` then find them."""
    from openqa.data.questions import DATASETS
    from openqa.methods import Request

    method, dataset = _method(method), arg.one_of("dataset", dataset, DATASETS)
    arg.flag("calibrate_only", calibrate_only)
    arg.flag("progress", progress)
    given = None if parts is None else tuple(arg.texts("parts", list(parts) if isinstance(parts, tuple) else parts))
    if given is not None and not given:
        raise UsageError("parts must name at least one method (or leave parts out for the default ones)")
    request = Request(engine=_optional_engine(engine), parts=given)
    return tune_in(Workspace.of(workspace, **where).context(), method, dataset, request, calibrate_only, progress)


def tune_in(ctx: Context, method: str, dataset: str, request: Request, calibrate_only: bool = False,
            progress: bool = False, limit: int | None = None) -> Tuning:
    """``tune`` in a given ``Context`` (the CLI's path)."""
    from openqa.pipeline import tune as run

    with shown(progress):
        record = run(ctx, method, dataset, request, calibrate_only, progress, limit)
    return Tuning(record.get("chosen"), record, record["files"])


# ------------------------------------------------------------------------------------ results


def browse_results(folder: str | Path, run: str | None = None) -> list[dict[str, Any]]:
    """The eval runs of a results folder, as ``openqa serve --results`` lists them (each with its
    dataset, split, method, questions, accuracy and interval, ECE, accuracy of the 20% most
    confident, date and openqa version; an unreadable record with its reason); with ``run`` (a
    record's name), that run's questions (prediction, answer, whether right, probabilities)."""
    from openqa.evaluate.browse import list_runs, run_questions

    where = arg.path("folder", folder)
    if where is None:
        raise UsageError("folder must name a results folder, not None")
    return list_runs(where) if run is None else run_questions(where, arg.text("run", run))


def result_curves(folder: str | Path, run: str) -> dict[str, Any]:
    """A run's risk-coverage curve (accuracy of the answered at 100 coverages, most confident first)
    and reliability diagram (10 equal-width bins of confidence), from its predictions file: what
    ``openqa serve --results`` draws."""
    from openqa.evaluate.browse import run_curves

    where = arg.path("folder", folder)
    if where is None:
        raise UsageError("folder must name a results folder, not None")
    return run_curves(where, arg.text("run", run))


# ------------------------------------------------------------------------ argument checks


def _lang(lang: Any) -> str:
    from openqa.languages import LANGS

    return arg.one_of("language", lang, LANGS)


def _engine(engine: Any) -> str:
    from openqa.retrieval.registry import ENGINES

    return arg.one_of("engine", engine, ENGINES)


def _optional_engine(engine: Any) -> str | None:
    return None if engine is None else _engine(engine)


def _method(name: Any) -> str:
    from openqa.methods import METHODS

    return arg.one_of("method", name, METHODS)


def _llm(llm: Any) -> None:
    from openqa.llm.settings import LLMSettings

    if llm is not None and not isinstance(llm, LLMSettings):
        raise UsageError(f"llm must be an LLMSettings, not {type(llm).__name__}")


def _overrides(top_n: Any, aggregate: Any, query: Any) -> Any:
    """The settings a call replaces, checked (``openqa.methods.Overrides``)."""
    from openqa.methods import Overrides
    from openqa.scorers.ir import AGGREGATES
    from openqa.scorers.query import QUERY_MODES

    return Overrides(top_n=arg.optional_whole("top_n", top_n, 1, MAX_K), aggregate=arg.optional_one_of("aggregate", aggregate, AGGREGATES),
                     query=arg.optional_one_of("query", query, QUERY_MODES))


__all__ = [
    "Answer", "BatchHits", "Built", "Evaluation", "OpenQAError", "SearchHit", "Searcher", "Solver", "Tuning",
    "Workspace", "browse_results", "build_index", "result_curves", "run_eval", "search_hits", "tune",
]
