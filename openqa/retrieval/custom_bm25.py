"""The paper's re-weighted BM25 (Appendix B) over a sparse term-by-paragraph matrix (CSR arrays).

The paper writes

    s(Q, D) = sum over terms q of Q:  BM25(q, D) * IDF(q) * f(q,Q)(kQ+1) / (f(q,Q) + kQ(1 - bQ + bQ|Q|/avgQL))
    BM25(q, D) = IDF(q) * f(q,D)(kD+1) / (f(q,D) + kD(1 - bD + bD|D|/avgDL))

so IDF enters twice: a rare term weighs IDF squared. This engine computes exactly that. The
document side, IDF(q)^2 * f(q,D)(kD+1) / (...), is precomputed at index time into one float32 CSR
matrix (a row per term); a search walks the rows of the query terms in the compiled kernel of
``custom_kernel`` (a question's options together, threads over questions) and keeps each query's
top k there: no Python loop over paragraphs or postings. IDF is Lucene's non-negative form
log(1 + (N - n + 0.5) / (n + 0.5)). The paper prints a document frequency in the document-side
denominator's place; like every BM25, it means f(q,D).

A build streams the corpus (``document_weights``: memory follows the index, not the text) and
writes the matrix as raw arrays that ``load`` memory-maps (format 2), so processes opening the same
index share it; indexes of format 1 (``weights.npz``) still open, read into memory.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from openqa.cancel import checkpoint
from openqa.corpus.paragraphs import Paragraph
from openqa.errors import UsageError
from openqa.progress import tqdm
from openqa.retrieval.base import (
    PARAGRAPHS,
    EngineOptions,
    Hit,
    Opening,
    ParagraphStore,
    QueryStatistics,
    Ranking,
    SearchEngine,
    StoreWriter,
    batches,
    term_ids,
)
from openqa.retrieval.manifest import MANIFEST, atomic_folder, require_words, write_manifest
from openqa.text.tokenize import Tokenizer, make_tokenizer

#: The weights of a format-1 index (one ``.npz``, read whole; still opened).
WEIGHTS = "weights.npz"
#: The weights of a format-2 index: the CSR arrays as raw ``.npy`` files, opened memory-mapped, so
#: every process that opens the index shares one copy in the page cache and reads only the rows
#: its queries touch.
WEIGHT_ARRAYS = {"data": "weights.data.npy", "indices": "weights.indices.npy", "indptr": "weights.indptr.npy"}
#: The on-disk format ``build`` writes (manifest key ``format``; an index without it is format 1).
FORMAT = 2
VOCAB = "vocab.txt"
#: Paragraphs a build tokenizes and counts together (their numbers within a chunk fit in uint16).
CHUNK = 1 << 14
#: Weight entries computed together at the end of a build (bounds the float64 temporaries).
WEIGH_SLICE = 1 << 22
#: The scoring an index's weights hold, in its manifest: an index built with another is refused.
SCORING = "appendix-b (IDF twice: BM25(q,D) x IDF(q) x query saturation)"
#: How much of a query must be text it shares with the queries before it to be searched with them.
SHARED_FRACTION = 0.25


@dataclass(frozen=True)
class CSR:
    """A term-by-paragraph matrix in compressed sparse rows: row t's paragraphs are
    ``indices[indptr[t]:indptr[t + 1]]`` with their weights in ``data`` (the arrays scipy.sparse
    uses, kept as plain numpy arrays: the compiled kernel reads them, and the core install needs no
    scipy)."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]


@dataclass(frozen=True)
class DocParams:
    """Document-side BM25 parameters, fixed when the index is built (paper: kD 0.9, bD 0.35)."""

    kd: float = 0.9
    bd: float = 0.35


@dataclass(frozen=True)
class QueryParams:
    """Query-side saturation. ``avg_len`` is avgQL, a fixed number (openqa tune measures it on the
    exam's dev queries and records it with the settings), so that a query's scores never depend on
    the queries searched beside it; None: each query's own length (|Q| / avgQL = 1)."""

    kq: float = 0.4
    bq: float = 0.7
    avg_len: float | None = None


#: Per-exam query parameters of the paper's Table B.13.
QUERY_PRESETS: dict[str, QueryParams] = {
    "usmle": QueryParams(kq=0.40, bq=0.70),
    "mcmle": QueryParams(kq=1.10, bq=0.20),
    "twmle": QueryParams(kq=0.90, bq=1.00),
}


def idf(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene's BM25 IDF, never negative."""
    return np.log1p((n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True)
class ChunkCounts:
    """Term counts of one chunk of paragraphs, compactly: the terms present (sorted) with how many of
    the chunk's paragraphs hold each (``runs``), then per (term, paragraph) entry, in term-then-
    paragraph order, the paragraph's number within the chunk and the count (2-3 bytes an entry)."""

    start: int
    terms: np.ndarray
    runs: np.ndarray
    docs: np.ndarray
    counts: np.ndarray


def count_chunk(term_lists: list[list[str]], vocab: dict[str, int], start: int) -> tuple[ChunkCounts, np.ndarray]:
    """Count the terms of paragraphs ``start``, ``start + 1``, ... (at most ``CHUNK``), adding new
    terms to ``vocab`` in order of first occurrence; also return the paragraphs' lengths in terms."""
    size = len(term_lists)
    ids, lengths = term_ids(term_lists, vocab)
    keys, counts = np.unique(ids * size + np.repeat(np.arange(size), lengths), return_counts=True)
    terms, runs = np.unique(keys // size, return_counts=True)
    docs = (keys % size).astype(np.uint16)
    return ChunkCounts(start, terms, runs, docs, counts.astype(np.min_scalar_type(counts.max(initial=0)))), lengths


def document_weights(term_lists: Iterable[list[str]], params: DocParams) -> tuple[CSR, list[str]]:
    """Term-by-paragraph CSR matrix of BM25(q,D) x IDF(q) (IDF squared times the document-side
    saturation), and the vocabulary (row order), from a stream of tokenized paragraphs.

    Memory follows the index, not the text: each chunk of paragraphs is reduced to its counts
    (``ChunkCounts``) as it arrives; IDF needs every term's document frequency, so the matrix is
    laid out (a counting sort of the chunks' entries into rows) and weighted once, at the end.
    """
    vocab: dict[str, int] = {}
    chunks: list[ChunkCounts] = []
    lengths: list[np.ndarray] = []
    start = 0
    for batch in batches(term_lists, CHUNK):
        counts, batch_lengths = count_chunk(batch, vocab, start)
        chunks.append(counts)
        lengths.append(batch_lengths)
        start += len(batch)
    doc_len = np.concatenate(lengths).astype(np.float64) if lengths else np.zeros(0)
    n, n_terms = len(doc_len), len(vocab)
    require_words(n_terms)
    doc_freq = np.zeros(n_terms, np.int64)
    for chunk in chunks:
        doc_freq[chunk.terms] += chunk.runs
    index_type = np.int32 if max(n, n_terms, int(doc_freq.sum())) <= np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(n_terms + 1, index_type)
    np.cumsum(doc_freq, out=indptr[1:])
    indices, tf = np.empty(indptr[-1], index_type), np.empty(indptr[-1], np.float32)
    free = indptr[:-1].astype(np.int64)  # next free entry of each row
    chunks.reverse()
    while chunks:  # chunks in paragraph order, freed as they are placed: each row's paragraphs come out sorted
        chunk = chunks.pop()
        run_starts = np.cumsum(chunk.runs) - chunk.runs
        places = np.repeat(free[chunk.terms] - run_starts, chunk.runs) + np.arange(len(chunk.docs))
        indices[places] = chunk.docs.astype(index_type) + chunk.start
        tf[places] = chunk.counts
        free[chunk.terms] += chunk.runs
    norm = params.kd * (1 - params.bd + params.bd * doc_len / (doc_len.mean() if n else 1.0))
    term_idf = idf(doc_freq, n)
    for first in range(0, len(tf), WEIGH_SLICE):  # in place: tf becomes the weights
        entries = slice(first, min(first + WEIGH_SLICE, len(tf)))
        rows = np.searchsorted(indptr[1:], np.arange(entries.start, entries.stop), side="right")
        f = tf[entries]
        tf[entries] = f * (params.kd + 1) / (f + norm[indices[entries]]) * term_idf[rows] ** 2
    return CSR(tf, indices, indptr, (n_terms, n)), list(vocab)


def write_weights(folder: Path, weights: CSR) -> None:
    """Store the weights' CSR arrays as the raw ``.npy`` files of ``WEIGHT_ARRAYS``."""
    for key, name in WEIGHT_ARRAYS.items():
        np.save(folder / name, getattr(weights, key))


def read_weights(at: Opening) -> tuple[CSR, str]:
    """The weights of the index being opened and the file that gives its term count: format 2's
    arrays memory-mapped (nothing is copied or read until searched), format 1's ``weights.npz``
    (scipy.sparse's file: the same arrays in a numpy archive) read whole; a format this openqa
    does not know is refused.

    The paragraph count comes from the manifest, which the paragraph store has confirmed (the
    kernel indexes its score buffer with paragraph numbers: a count edited in the manifest alone
    would make it read past the buffer).
    """
    folder, manifest = at.folder, at.manifest
    version = manifest.get("format", 1)
    if version == 1:
        with at.reading(WEIGHTS, errors=(KeyError,)), np.load(folder / WEIGHTS, allow_pickle=False) as archive:
            kind = archive["format"].item()  # scipy stores it as bytes
            if (kind.decode() if isinstance(kind, bytes) else str(kind)) != "csr":
                raise at.damaged(WEIGHTS, f"holds a {kind!r} matrix, not csr")
            shape = tuple(int(x) for x in archive["shape"])
            return CSR(archive["data"], archive["indices"], archive["indptr"], (shape[0], shape[1])), WEIGHTS
    if version != FORMAT:
        raise at.mismatch(f"has format {version!r}, which this openqa does not read")
    arrays = {}
    for key, name in WEIGHT_ARRAYS.items():
        with at.reading(name):
            arrays[key] = np.load(folder / name, mmap_mode="r")
    data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
    if (any(a.ndim != 1 for a in arrays.values()) or len(indptr) == 0 or data.dtype != np.float32
            or indices.dtype != indptr.dtype or indices.dtype not in (np.int32, np.int64)):
        kinds = ", ".join(f"{a.dtype}{a.shape}" for a in arrays.values())
        raise at.damaged("weights arrays", f"have the wrong shapes or types ({kinds})")
    sizes = {WEIGHT_ARRAYS["data"]: len(data), WEIGHT_ARRAYS["indices"]: len(indices), WEIGHT_ARRAYS["indptr"]: int(indptr[-1])}
    at.counts("weight entry", sizes)
    return CSR(data, indices, indptr, (len(indptr) - 1, at.paragraphs)), WEIGHT_ARRAYS["indptr"]


@dataclass(frozen=True)
class QueryTerms:
    """Tokenized queries as the search kernel reads them.

    Query q's known term rows are ``rows[starts[q]:starts[q + 1]]`` (a repeated term repeats);
    ``lengths[q]`` counts all its terms, unknown ones too, since they lengthen the query in the
    saturation. Queries ``groups[g]:groups[g + 1]`` (at most ``LANES``) share most of their terms,
    one question's options, and are scored in one pass over the postings.
    """

    rows: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    groups: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)


def common_prefix_length(a: str, b: str, limit: int | None = None) -> int:
    """Length of the longest common prefix of ``a`` and ``b``, or ``limit`` if they share more:
    one comparison when they share it all (as a question's options' queries do), else a binary
    search of string comparisons, which run in C, instead of a Python loop over characters."""
    low, high = 0, min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    if a.startswith(b[:high]):
        return high
    high -= 1
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:  # a[:low] == b[:low] already
            low = middle
        else:
            high = middle - 1
    return low


def shared_runs(queries: Sequence[str]) -> list[tuple[int, int, int]]:
    """Runs of consecutive queries that begin with the same text, as ``(start, stop, cut)``: every
    query of ``queries[start:stop]`` begins with ``queries[start][:cut]`` and then a space (cut 0:
    nothing shared). A query joins the run before it when that shared text is at least
    ``SHARED_FRACTION`` of both it and the run's first query, as a question is of each of its
    options' queries ("question option"); consecutive queries of different questions share a few
    words at most and start new runs."""
    runs: list[tuple[int, int, int]] = []
    start, shared = 0, len(queries[0]) if queries else 0
    for i in range(1, len(queries) + 1):
        if i < len(queries):
            common = common_prefix_length(queries[i - 1], queries[i], shared)
            if queries[i].rfind(" ", 0, common) >= SHARED_FRACTION * max(len(queries[start]), len(queries[i])) > 0:
                shared = common
                continue
        cut = queries[start].rfind(" ", 0, shared) if i - start > 1 else 0
        runs.append((start, i, max(cut, 0)))
        if i < len(queries):
            start, shared = i, len(queries[i])
    return runs


def segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions of segments ``starts[i]:starts[i] + lengths[i]``, one segment after another
    (an array's slices concatenated, without a Python loop over them)."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)


def splits_at_spaces(tokenizer: Tokenizer) -> bool:
    """Whether the query terms of ``a + " " + b`` are always those of ``a`` followed by those of
    ``b``, so that text shared by many queries can be tokenized once.

    True unless word bigrams are on (English, or Chinese jieba words, with ngram 2): their bigram
    spans the space. Every tokenizer splits words at spaces, Chinese character bigrams stop at
    them, and the traditional-to-simplified conversion converts the stretches between spaces on
    their own.
    """
    config = tokenizer.config()
    return config.get("ngram", 1) < 2 or config.get("mode") == "char"


class CustomBM25(SearchEngine):
    """IR-Custom's engine: precomputed document weights, query-side saturation at search time."""

    name = "custom"
    summary = "IR-Custom's sparse index (seconds)"
    quick_build = True
    identity = {"scoring": SCORING}
    #: The fewest groups of queries a thread is given at a time: a search of fewer than twice as
    #: many runs in the calling thread alone.
    THREAD_CHUNK = 32

    def __init__(self, folder: Path, manifest: dict[str, Any], weights: CSR, vocab: list[str], paragraphs: ParagraphStore):
        self.folder = folder
        self.manifest = manifest
        self.weights = weights
        self.vocab = {term: i for i, term in enumerate(vocab)}
        self.tokenizer: Tokenizer = make_tokenizer(manifest["tokenizer"])
        self.paragraphs = paragraphs
        #: Threads a search uses (the cores this process may run on, unless set).
        self.threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self._splits = splits_at_spaces(self.tokenizer)
        # The kernel reads paragraph numbers unsigned, which spares it negative-index checks.
        self._indices = weights.indices.view(np.uint32 if weights.indices.dtype == np.int32 else np.uint64)
        self._buffers = threading.local()

    @classmethod
    def build(
        cls,
        folder: Path,
        paragraphs: Iterable[Paragraph],
        tokenizer: Tokenizer,
        corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
        params: DocParams = DocParams(),
    ) -> None:
        """Index the stream ``paragraphs`` into ``folder`` atomically with document-side parameters
        ``params``, writing the paragraph store as they pass."""
        with atomic_folder(folder) as scratch:
            store = StoreWriter(scratch / PARAGRAPHS)
            passing = tqdm(store.passing(paragraphs), desc="indexing (custom)", unit="para", leave=False)
            weights, vocab = document_weights((tokenizer.tokenize(p.text) for p in passing), params)
            write_weights(scratch, weights)
            (scratch / VOCAB).write_text("\n".join(vocab) + "\n", encoding="utf-8")
            write_manifest(
                scratch,
                {
                    "engine": cls.name,
                    "scoring": SCORING,
                    "format": FORMAT,
                    **corpus,
                    "tokenizer": tokenizer.config(),
                    "doc_params": asdict(params),
                    "paragraphs": store.rows,
                    "terms": len(vocab),
                },
            )

    @classmethod
    def open(cls, at: Opening, **parts: Any) -> "CustomBM25":
        """Memory-map the weights (format 2; format 1 is read whole) and read the vocabulary; their
        term and paragraph counts must agree with the manifest's."""
        weights, source = read_weights(at)
        with at.reading(VOCAB):
            vocab = (at.folder / VOCAB).read_text(encoding="utf-8").split("\n")[:-1]
        terms, paragraphs = weights.shape
        at.counts("term", {VOCAB: len(vocab), source: terms, MANIFEST: at.manifest.get("terms")})
        at.counts("paragraph", {source: paragraphs, MANIFEST: at.paragraphs})
        assert at.store is not None  # the engine stores paragraphs: load opened the store
        return cls(at.folder, at.manifest, weights, vocab, at.store)

    def warm(self) -> None:
        """Also load the compiled kernel (numba's cached machine code: a second or two, during which
        every other first search would wait) with one search."""
        super().warm()
        self.search(["warm"], 1)

    def query_terms(self, text: str) -> list[str]:
        """The terms of query text, after the tokenizer's query normalisation."""
        tok = self.tokenizer
        return tok.tokenize(tok.prepare_query(text))

    def encode(self, queries: Sequence[str]) -> QueryTerms:
        """Tokenize ``queries`` into term rows, the text a run of queries shares (a question, in
        each of its options' queries) once per run when the tokenizer allows (``splits_at_spaces``),
        then look all their terms up in the vocabulary at once; each run is scored in groups of at
        most ``LANES``."""
        from openqa.retrieval.custom_kernel import LANES  # numba: imported when first searched

        texts: list[str] = []  # each run's shared text ("" when none), then its queries' own texts
        halves: list[int] = []  # query q's terms: those of texts[halves[2q]], then of texts[halves[2q + 1]]
        groups = [0]
        for start, stop, cut in shared_runs(queries):
            cut = cut if self._splits else 0
            head = len(texts)
            texts.append(queries[start][:cut])
            texts += [text[cut:] for text in queries[start:stop]]
            halves += [half for tail in range(head + 1, len(texts)) for half in (head, tail)]
            groups += [*range(start + LANES, stop, LANES), stop]
        terms = [self.query_terms(text) if text else [] for text in texts]
        counts = np.fromiter(map(len, terms), np.int64, len(terms))  # every term: unknown ones lengthen a query too
        rows = np.fromiter(map(self.vocab.get, chain.from_iterable(terms), repeat(-1)), np.int64, int(counts.sum()))
        known = rows >= 0
        known_before = np.concatenate([[0], np.cumsum(known)])  # of the terms before each term (and the end)
        text_starts = np.concatenate([[0], np.cumsum(counts)])
        first_known, known_counts = known_before[text_starts[:-1]], np.diff(known_before[text_starts])
        parts = np.asarray(halves, np.int64)
        sizes = known_counts[parts]
        return QueryTerms(
            rows=rows[known].astype(np.int32)[segments(first_known[parts], sizes)],
            starts=np.concatenate([[0], np.cumsum(sizes.reshape(-1, 2).sum(axis=1))]).astype(np.int64),
            lengths=counts[parts].reshape(-1, 2).sum(axis=1).astype(np.float64),
            groups=np.asarray(groups, np.int64),
        )

    def rank(self, terms: QueryTerms, k: int, params: QueryParams | None = None, threads: int | None = None) -> Ranking:
        """Each query's top ``k`` paragraphs (positive scores only), searched by the compiled
        kernel on ``threads`` threads (default: ``self.threads``), with the query-side ``params`` (default: the paper's USMLE
        values); avgQL is theirs, else each query's own length: never the batch's."""
        from openqa.retrieval.custom_kernel import rank_groups

        k = max(0, min(k, self.weights.shape[1]))
        n = len(terms)
        ranking = Ranking(np.full((n, k), -1, np.int32), np.zeros((n, k), np.float32), np.zeros(n, np.int32))
        if n == 0 or k == 0:
            return ranking
        params = params or QueryParams()
        lengths, avg_len = (terms.lengths, params.avg_len) if params.avg_len else (np.ones(n), 1.0)

        def run(span: tuple[int, int]) -> None:
            rank_groups(
                self.weights.shape[1], self.weights.indptr, self._indices, self.weights.data,
                terms.rows, terms.starts, lengths, terms.groups[span[0] : span[1] + 1],
                avg_len, params.kq, params.bq, self._buffer(), ranking.rows, ranking.scores, ranking.counts,
            )

        n_groups = len(terms.groups) - 1
        threads = threads or self.threads
        parts = min(threads * 4, n_groups // self.THREAD_CHUNK)
        if threads < 2 or parts < 2:
            run((0, n_groups))
        else:
            bounds = np.linspace(0, n_groups, parts + 1).astype(int)
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, zip(bounds[:-1], bounds[1:])))
        return ranking

    def _buffer(self) -> np.ndarray:
        """This thread's score buffer for the kernel (zeros, as the kernel leaves it)."""
        from openqa.retrieval.custom_kernel import LANES

        buffer = getattr(self._buffers, "scores", None)
        if buffer is None:
            buffer = self._buffers.scores = np.zeros(self.weights.shape[1] * LANES, np.float32)
        return buffer

    def search(
        self, queries: Sequence[str], k: int, params: QueryParams | None = None, progress: Callable[[int], None] | None = None,
        threads: int | None = None,
    ) -> list[list[Hit]]:
        """All ``queries`` tokenized once and ranked in one call (threads share them out); each
        query's hits are those it gets searched alone (avgQL is fixed by ``params``, see ``QueryParams``)."""
        hits = self.ranking(queries, k, params, threads).hits()
        if progress:
            progress(len(queries))
        return hits

    def ranking(self, queries: Sequence[str], k: int, params: QueryParams | None = None, threads: int | None = None) -> Ranking:
        """The hits of ``search`` as the kernel's arrays (float32 scores), no ``Hit`` made."""
        terms = self.encode(queries)
        checkpoint()
        return self.rank(terms, k, params, threads)

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return self.search(queries, k)

    def query_params(self, params: QueryParams | None) -> dict[str, Any]:
        """kQ, bQ and avgQL (None: each query's own length)."""
        p = params or QueryParams()
        return {"kq": p.kq, "bq": p.bq, "avg_ql": p.avg_len}

    def with_query_params(self, params: QueryParams | None, values: dict[str, Any]) -> QueryParams:
        """``params`` with ``kq`` (>= 0), ``bq`` (0 to 1) or ``avg_ql`` (> 0, or None) replaced."""
        p = params or QueryParams()
        unknown = sorted(set(values) - {"kq", "bq", "avg_ql"})
        if unknown:
            raise UsageError(f"the custom engine has no parameter {unknown[0]!r}: set kq, bq or avg_ql")
        for name, value in values.items():
            if value is None and name == "avg_ql":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise UsageError(f"{name} must be a number, not {value!r}")
        kq, bq = float(values.get("kq", p.kq)), float(values.get("bq", p.bq))
        avg = values.get("avg_ql", p.avg_len)
        if kq < 0 or not 0 <= bq <= 1 or (avg is not None and avg <= 0):
            raise UsageError(f"kq must be at least 0, bq from 0 to 1 and avg_ql above 0 (or None), not {kq}, {bq}, {avg}")
        return QueryParams(kq, bq, None if avg is None else float(avg))

    def query_statistics(self, queries: Sequence[str]) -> QueryStatistics:
        """avgQL: the mean length in terms of ``queries`` (all terms, known or not, as the saturation
        counts them; at least 1)."""
        terms = self.encode(queries)
        return {"avg_ql": max(float(terms.lengths.mean()), 1.0)} if len(terms) else {}
