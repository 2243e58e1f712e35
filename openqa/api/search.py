"""Searching one index: ranked paragraphs for a query, or arrays of them for many."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence, cast, overload

from openqa import arguments as arg
from openqa.api.checks import DEFAULT_K, MAX_K, engine_name, lang_name
from openqa.api.workspace import Workspace
from openqa.errors import IndexDamagedError, UsageError
from openqa.extras import needs
from openqa.retrieval.base import SearchEngine

if TYPE_CHECKING:
    import numpy as np

    from openqa.methods.base import Estimate
    from openqa.retrieval.base import Index


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


#: The types (exactly) a ``SearchHit``'s fields have in ``BatchHits``, in field order, and how errors name them.
_HIT_FIELDS: tuple[tuple[set[type], str], ...] = (({str}, "text"), ({str}, "text"), ({float, int}, "a number"), ({str}, "text"), ({int}, "a whole number"))


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

    def __post_init__(self) -> None:
        """Refuse fields of the wrong type in one line (a caller building one by hand), so that
        every method works on what was accepted. The hits are checked by type a column at a time
        (C loops: a million hits take milliseconds)."""
        if not isinstance(self.hits, list) or not all(isinstance(row, list) for row in self.hits):
            raise UsageError("hits must be a list (one a query) of lists of SearchHit")
        flat = [hit for row in self.hits for hit in row]
        if not set(map(type, flat)) <= {SearchHit}:
            raise UsageError("hits must be a list (one a query) of lists of SearchHit")
        columns = list(zip(*flat)) or [()] * 5
        for name, column, (kinds, what) in zip(SearchHit._fields, columns, _HIT_FIELDS):
            if not set(map(type, column)) <= kinds:
                raise UsageError(f"every SearchHit's {name} must be {what}")
        arg.whole("k", self.k, 1, MAX_K)
        if max(map(len, self.hits), default=0) > self.k:
            raise UsageError(f"a query has more hits than k ({self.k})")
        arg.texts("qids", self.qids)
        if self.qids and len(self.qids) != len(self.hits):
            raise UsageError(f"give one id per query: {len(self.qids)} ids for {len(self.hits)} queries")
        if not isinstance(self.params, dict) or not all(isinstance(key, str) for key in self.params):
            raise UsageError("params must be a dict of the engine's parameters by name")

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
        if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(key, str) for key in metadata)):
            raise UsageError(f"metadata must be None or a dict by name, not {type(metadata).__name__}")
        text = "".join(line + "\n" for line in self.trec_lines(tag))
        meta = {"k": self.k, "queries": len(self.qids), "tag": tag, "params": self.params, **(metadata or {}), **run_record()}
        try:
            blob = json.dumps(meta, indent=2, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise UsageError(f"metadata must hold only JSON values (text, finite numbers, lists, dicts): {arg.shown(exc)}") from None
        if not arg.encodable(blob):
            raise UsageError("metadata must hold UTF-8 text (it holds a lone surrogate)")
        return write_output(target, text, blob + "\n")

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
    import numpy as np

    check_queries(queries, k)
    ranking = engine.ranking(list(queries), k, params, threads=threads)
    # Every query's hits made in one pass over the ranking's hits (its padding left out), then cut
    # per query: no Python loop per query, and fewer lists for the garbage collector to walk.
    found = np.arange(ranking.rows.shape[1]) < ranking.counts[:, None]
    paragraphs = engine.paragraphs.many(ranking.rows[found].tolist())
    hits = list(map(SearchHit, [p.pid for p in paragraphs], [p.book for p in paragraphs], rounded(ranking.scores[found]),
                    [p.text for p in paragraphs], (np.nonzero(found)[1] + 1).tolist()))
    ends = np.cumsum(ranking.counts).tolist()
    return [hits[start:end] for start, end in zip([0, *ends], ends)]


def rounded(scores: np.ndarray) -> list[float]:
    """``round(float(s), 4)`` of every score, as hits give them. Float32 scores (IR-Custom's) are
    rounded by numpy at once, to the same floats: a float32 times 10^4 is exact in float64 (24 + 10
    significant bits), so numpy's ``rint(s * 10^4) / 10^4`` rounds the exact decimal value half
    to even and divides correctly rounded, as Python's ``round`` does; other scores by ``round``."""
    import numpy as np

    if scores.dtype == np.float32:
        return cast(list[float], np.round(scores.astype(np.float64), 4).tolist())
    return [round(score, 4) for score in scores.tolist()]


def folder_hint(folder: Path) -> str:
    """The command that builds an index into ``folder``, for an error about it: read from the folder's
    name where openqa could have named it (``[NAME-]LANG-ENGINE``), else with the choices spelled out
    (the index directory is the folder's parent: openqa names the folder inside it)."""
    import re

    from openqa.languages import LANGUAGES
    from openqa.retrieval.registry import ENGINES

    where = f" --index-dir {folder.parent}"
    named = re.fullmatch(r"(?:(?P<name>.+)-)?(?P<lang>[a-z]+)-(?P<engine>[a-z0-9]+)", folder.name)
    if named and named["lang"] in LANGUAGES and named["engine"] in ENGINES:
        corpus = f" --corpus PATH --name {named['name']}" if named["name"] else ""
        return f"openqa index --lang {named['lang']} --engine {named['engine']}{corpus}{where}"
    return f"openqa index --lang {'|'.join(LANGUAGES)} --engine {'|'.join(ENGINES)}{where}"  # it names the folder LANG-ENGINE


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
        read_manifest(folder, folder_hint(folder))  # says what is wrong
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
        from openqa.retrieval.base import Index

        if not isinstance(engine, Index):
            raise UsageError(f"engine must be an index openqa opened (see Searcher.open and Searcher.from_folder), "
                             f"not {type(engine).__name__}")
        if not isinstance(engine, SearchEngine):
            raise UsageError(f"the {engine.name} index does not search paragraphs: use custom, lucene, elasticsearch or dense")
        self.engine = engine
        self._params: Any = None  # the engine's defaults

    @classmethod
    def open(cls, lang: str = "en", engine: str = "custom", *, corpus: str | None = None,
             workspace: Workspace | None = None, **where: Any) -> Searcher:
        """The ``lang`` index of ``engine`` over the MedQA textbooks, or over a corpus indexed with
        ``build_index(..., corpus=PATH, name=corpus)``. A missing custom index of the textbooks is
        built first when ``data_dir`` holds them (seconds).

        :param lang: the corpus language, ``en`` or ``zh``.
        :param engine: ``custom``, ``pmi``, ``lucene``, ``elasticsearch`` or ``dense``.
        :param corpus: a corpus indexed with ``build_index(corpus=..., name=...)``.
        :param workspace: where data, indexes, settings and results are (a ``Workspace``); its fields may
        also be given as keywords (``data_dir=...``, ``index_dir=...``), each defaulting to its
        environment variable.
        :returns: the searcher over that index."""
        ctx = Workspace.of(workspace, corpus=corpus, **where).context()
        return cls(ctx.open(lang_name(lang), engine_name(engine)))

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
        """The top ``k`` paragraphs for ``query``, best first; for a list of queries, one list each.

        :param query: a query, or a list of queries.
        :param k: paragraphs per query (at most ``MAX_K``).
        :returns: ``SearchHit``s (paragraph id, book, score, text), one list per query for a list."""
        if isinstance(query, str):
            return search_hits(self.engine, [query], k, self._params)[0]
        return search_hits(self.engine, arg.texts("query", query), k, self._params)

    def estimate(self, query: str) -> Estimate:
        """What searching ``query`` is estimated to cost before it runs (an ``Estimate``: the query's
        index terms, and the seconds they take), as ``openqa serve`` weighs ``POST /v1/search``.

        :param query: the query.
        :returns: its ``Estimate``."""
        from openqa.methods.base import SEARCH_COST, query_terms

        check_queries([query], DEFAULT_K)
        return SEARCH_COST.estimate(self.engine.manifest.get("lang", ""), query_terms(self.engine, [query]))

    def batch_search(self, queries: Sequence[str], qids: Sequence[str] | None = None, k: int = DEFAULT_K,
                     threads: int = 1) -> BatchHits:
        """The hits of many queries with their ids (default "1", "2", ...), through the engine's
        batched search on ``threads`` threads (IR-Custom's kernel; other engines search their batches
        in turn); each query's hits are exactly those ``search`` gives it alone."""
        from openqa.data.topics import check_run_word

        queries = arg.texts("queries", queries)
        if qids is None:
            ids = [str(i) for i in range(1, len(queries) + 1)]
        else:
            ids = arg.texts("qids", qids)
            if len(ids) != len(queries):
                raise UsageError(f"give one id per query: {len(ids)} ids for {len(queries)} queries")
            if len(set(ids)) != len(ids):
                raise UsageError("query ids must differ from each other")
            for qid in ids:
                check_run_word("query id", qid)
        arg.whole("threads", threads, 1, 256)
        params = self._params  # taken once: a set_params meanwhile (another thread) changes neither the hits nor what they say
        return BatchHits(search_hits(self.engine, queries, k, params, threads), k, ids, self.engine.query_params(params))


# --------------------------------------------------------------------------------------- solve


