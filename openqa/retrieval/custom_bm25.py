"""The paper's re-weighted BM25 (Appendix B) over a scipy.sparse term-by-paragraph matrix.

The paper writes

    s(Q, D) = sum over terms q of Q:  BM25(q, D) * IDF(q) * f(q,Q)(kQ+1) / (f(q,Q) + kQ(1 - bQ + bQ|Q|/avgQL))
    BM25(q, D) = IDF(q) * f(q,D)(kD+1) / (f(q,D) + kD(1 - bD + bD|D|/avgDL))

so IDF enters twice: a rare term weighs IDF squared. This engine computes exactly that. The
document side, IDF(q)^2 * f(q,D)(kD+1) / (...), is precomputed at index time into one float32 CSR
matrix (a row per term), so a query is a sparse row slice times a small dense matrix of query-side
weights: no Python loop over paragraphs. IDF is Lucene's non-negative form
log(1 + (N - n + 0.5) / (n + 0.5)). The paper prints a document frequency in the document-side
denominator's place; like every BM25, it means f(q,D).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from openqa.corpus.paragraphs import Paragraph
from openqa.retrieval.base import EngineOptions, PARAGRAPHS, Hit, ParagraphStore, SearchEngine
from openqa.retrieval.manifest import (
    MANIFEST, atomic_folder, check_counts, check_manifest, loading, read_manifest, write_manifest,
)
from openqa.text.tokenize import Tokenizer, make_tokenizer

WEIGHTS = "weights.npz"
VOCAB = "vocab.txt"
#: The scoring an index's weights hold, in its manifest: an index built with another is refused.
SCORING = "appendix-b (IDF twice: BM25(q,D) x IDF(q) x query saturation)"


@dataclass(frozen=True)
class DocParams:
    """Document-side BM25 parameters, fixed when the index is built (paper: kD 0.9, bD 0.35)."""

    kd: float = 0.9
    bd: float = 0.35


@dataclass(frozen=True)
class QueryParams:
    """Query-side saturation; ``avg_len`` None means the mean length of the queries searched."""

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


def document_weights(
    term_lists: Iterable[list[str]], params: DocParams, n_docs: int | None = None
) -> tuple[sp.csr_matrix, list[str]]:
    """Term-by-paragraph CSR matrix of BM25(q,D) x IDF(q) (IDF squared times the document-side
    saturation), and the vocabulary (row order)."""
    vocab: dict[str, int] = {}
    term_ids: list[np.ndarray] = []
    lengths: list[int] = []
    for terms in tqdm(term_lists, total=n_docs, desc="tokenizing", unit="para", leave=False):
        ids = [vocab.setdefault(t, len(vocab)) for t in terms]
        term_ids.append(np.asarray(ids, dtype=np.int32))
        lengths.append(len(ids))
    n = len(lengths)
    doc_len = np.asarray(lengths, dtype=np.float64)
    rows = np.concatenate(term_ids) if term_ids else np.zeros(0, np.int32)
    cols = np.repeat(np.arange(n, dtype=np.int32), doc_len.astype(np.int64))
    tf = sp.csr_matrix(
        (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(vocab), n), dtype=np.float32
    )
    tf.sum_duplicates()
    doc_freq = np.diff(tf.indptr)
    avg_len = doc_len.mean() if n else 1.0
    norm = params.kd * (1 - params.bd + params.bd * doc_len / avg_len)
    term_of_entry = np.repeat(np.arange(len(vocab)), doc_freq)
    data = tf.data * (params.kd + 1) / (tf.data + norm[tf.indices]) * idf(doc_freq, n)[term_of_entry] ** 2
    weights = sp.csr_matrix((data.astype(np.float32), tf.indices, tf.indptr), shape=tf.shape)
    return weights, list(vocab)


def query_weights(counts: np.ndarray, length: float, avg_len: float, params: QueryParams) -> np.ndarray:
    """Query-side saturation of term counts ``counts`` in a query of ``length`` terms."""
    norm = params.kq * (1 - params.bq + params.bq * length / avg_len)
    return counts * (params.kq + 1) / (counts + norm)


def top_k(scores: np.ndarray, k: int) -> list[list[Hit]]:
    """Best ``k`` positive-scoring columns of each row, best first (ties: lower index first).

    Candidates are first cut to scores above a fraction of the row's best (halving the fraction
    until ``k`` pass), which is much cheaper than a partition over every paragraph.
    """
    out = []
    for row in scores:
        best = float(row.max(initial=0.0))
        if best <= 0 or k <= 0:
            out.append([])
            continue
        fraction = 0.5
        candidates = np.flatnonzero(row >= best * fraction)
        while len(candidates) < k and fraction > 1e-3:
            fraction /= 4
            candidates = np.flatnonzero(row >= best * fraction)
        if len(candidates) < k:
            candidates = np.flatnonzero(row > 0)
        chosen = candidates[np.lexsort((candidates, -row[candidates]))[:k]]
        out.append([Hit(int(i), float(row[i])) for i in chosen])
    return out


class CustomBM25(SearchEngine):
    """IR-Custom's engine: precomputed document weights, query-side saturation at search time."""

    name = "custom"
    quick_build = True

    def __init__(self, folder: Path, manifest: dict[str, Any], weights: sp.csr_matrix, vocab: list[str], paragraphs: ParagraphStore):
        self.folder = folder
        self.manifest = manifest
        self.weights = weights
        self.vocab = {term: i for i, term in enumerate(vocab)}
        self.tokenizer: Tokenizer = make_tokenizer(manifest["tokenizer"])
        self.paragraphs = paragraphs
        self.query_params = QueryParams()

    @classmethod
    def build(
        cls,
        folder: Path,
        paragraphs: Sequence[Paragraph],
        tokenizer: Tokenizer,
        corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
        params: DocParams = DocParams(),
    ) -> None:
        """Index ``paragraphs`` into ``folder`` atomically with document-side parameters ``params``."""
        with atomic_folder(folder) as scratch:
            terms = (tokenizer.tokenize(p.text) for p in paragraphs)
            weights, vocab = document_weights(terms, params, n_docs=len(paragraphs))
            sp.save_npz(scratch / WEIGHTS, weights, compressed=False)
            (scratch / VOCAB).write_text("\n".join(vocab) + "\n", encoding="utf-8")
            ParagraphStore.write(scratch / PARAGRAPHS, paragraphs)
            write_manifest(
                scratch,
                {
                    "engine": cls.name,
                    "scoring": SCORING,
                    **corpus,
                    "tokenizer": tokenizer.config(),
                    "doc_params": asdict(params),
                    "paragraphs": len(paragraphs),
                    "terms": len(vocab),
                },
            )

    @classmethod
    def load(cls, folder: Path, expected: dict[str, Any], build_hint: str, options: EngineOptions = EngineOptions()) -> "CustomBM25":
        """Open the index, refusing one built otherwise or whose files are damaged (see ``manifest``)."""
        manifest = read_manifest(folder, build_hint)
        check_manifest(manifest, {"engine": cls.name, "scoring": SCORING, **expected}, folder, build_hint)
        with loading(folder, WEIGHTS, build_hint):
            weights = sp.load_npz(folder / WEIGHTS).tocsr()
        with loading(folder, VOCAB, build_hint):
            vocab = (folder / VOCAB).read_text(encoding="utf-8").split("\n")[:-1]
        terms, paragraphs = weights.shape
        check_counts(folder, "term", {VOCAB: len(vocab), WEIGHTS: terms, MANIFEST: manifest.get("terms")}, build_hint)
        check_counts(folder, "paragraph", {WEIGHTS: paragraphs, MANIFEST: manifest.get("paragraphs")}, build_hint)
        return cls(folder, manifest, weights, vocab, ParagraphStore(folder / PARAGRAPHS, paragraphs, build_hint))

    def term_ids(self, terms: list[str]) -> list[int]:
        """Vocabulary rows of the query terms the index knows (unknown terms score nothing)."""
        vocab = self.vocab
        return [vocab[t] for t in terms if t in vocab]

    def score_terms(self, term_lists: Sequence[list[str]], avg_len: float | None = None) -> np.ndarray:
        """Dense (queries x paragraphs) scores for tokenized queries searched together."""
        lengths = np.array([len(t) for t in term_lists], dtype=np.float64)
        params = self.query_params
        avg = avg_len or params.avg_len or max(lengths.mean(), 1.0)
        ids = [self.term_ids(t) for t in term_lists]
        rows = np.unique(np.concatenate([np.asarray(i, dtype=np.int64) for i in ids]))
        if len(rows) == 0:
            return np.zeros((len(term_lists), self.weights.shape[1]), np.float32)
        counts = np.zeros((len(term_lists), len(rows)), np.float32)
        for q, qids in enumerate(ids):
            np.add.at(counts[q], np.searchsorted(rows, qids), 1.0)
        qw = query_weights(counts, lengths[:, None], avg, params).astype(np.float32)
        return np.asarray((self.weights[rows].T @ qw.T).T)

    def tokenize_queries(self, queries: Sequence[str]) -> list[list[str]]:
        """Query terms, after the tokenizer's query normalisation."""
        tok = self.tokenizer
        return [tok.tokenize(tok.prepare_query(q)) for q in queries]

    def fit_queries(self, queries: Sequence[str]) -> None:
        """Set avgQL, the paper's average query length, to the mean over this query set."""
        lengths = [len(t) for t in self.tokenize_queries(queries)]
        avg = sum(lengths) / len(lengths) if lengths else None
        self.query_params = replace(self.query_params, avg_len=avg or None)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return top_k(self.score_terms(self.tokenize_queries(queries)), k)
