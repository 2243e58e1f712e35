"""A positional index for PMI: where every term occurs in one token stream of the corpus.

Paragraphs are laid end to end with a gap of ``GAP`` positions between them, so no window
crosses a paragraph boundary. Postings are the sorted positions of each term (one CSR-like pair
of arrays); positions of a phrase or skip-bigram are intersections of shifted postings.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from openqa.cancel import checkpoint
from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.progress import tqdm
from openqa.retrieval.base import EngineOptions, Index, Opening, batches, term_ids
from openqa.retrieval.manifest import MANIFEST, atomic_folder, require_words, write_manifest
from openqa.text.tokenize import Tokenizer, make_tokenizer

POSITIONS = "positions.npy"
INDPTR = "indptr.npy"
VOCAB = "vocab.txt"
#: Empty positions between paragraphs: larger than any co-occurrence window used.
GAP = 64
#: Paragraphs a build tokenizes together.
CHUNK = 1 << 14

#: PMI reads a plain sequence of single terms: stemmed words (en) or jieba words (zh).
SEQUENCE_TOKENIZERS: dict[str, dict[str, Any]] = {
    "en": {"lang": "en", "ngram": 1, "stem": True},
    "zh": {"lang": "zh", "mode": "word", "ngram": 1},
}

Gram = tuple[str, ...]  # terms; "" marks the skipped slot of a skip-bigram


class PositionalIndex(Index):
    """Sorted term positions over the whole corpus, and counts of n-grams and co-occurrences."""

    name = "pmi"
    summary = "a positional index, for pmi (seconds)"
    quick_build = True
    #: The paragraphs are one token stream (``GAP`` positions apart); no paragraph store.
    stores_paragraphs = False
    tokenizers = SEQUENCE_TOKENIZERS

    def __init__(self, folder: Path, manifest: dict[str, Any], positions: np.ndarray, indptr: np.ndarray, vocab: list[str]):
        self.folder = folder
        self.manifest = manifest
        self.tokenizer: Tokenizer = make_tokenizer(manifest["tokenizer"])
        self.positions = positions
        self.indptr = indptr
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.total = len(positions)
        self.grams = lru_cache(maxsize=200_000)(self._gram_positions)

    @classmethod
    def build(
        cls, folder: Path, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
    ) -> None:
        """Tokenize the stream of paragraphs, a chunk at a time, into one token stream and store
        each term's sorted positions."""
        if tokenizer.config() != make_tokenizer(SEQUENCE_TOKENIZERS[tokenizer.lang]).config():
            raise OpenQAError(f"the PMI index uses its own tokenizer {SEQUENCE_TOKENIZERS[tokenizer.lang]}: drop --ngram/--zh-mode")
        vocab: dict[str, int] = {}
        ids, starts, cursor, rows = [], [], 0, 0
        for batch in batches(tqdm(paragraphs, desc="positions (pmi)", unit="para"), CHUNK):
            batch_ids, lengths = term_ids([tokenizer.tokenize(p.text) for p in batch], vocab)
            firsts = cursor + np.cumsum(lengths + GAP) - (lengths + GAP)  # each paragraph's first position
            ids.append(batch_ids.astype(np.int32))
            starts.append(np.repeat(firsts - (np.cumsum(lengths) - lengths), lengths) + np.arange(len(batch_ids)))
            cursor += int((lengths + GAP).sum())
            rows += len(batch)
        require_words(len(vocab))
        all_ids = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        pos = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        order = np.argsort(all_ids, kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(all_ids, minlength=len(vocab)))])
        with atomic_folder(folder) as scratch:
            np.save(scratch / POSITIONS, pos[order])
            np.save(scratch / INDPTR, indptr.astype(np.int64))
            (scratch / VOCAB).write_text("\n".join(vocab) + "\n", encoding="utf-8")
            write_manifest(
                scratch,
                {"engine": cls.name, **corpus, "tokenizer": tokenizer.config(), "paragraphs": rows,
                 "tokens": int(len(all_ids)), "terms": len(vocab), "gap": GAP},
            )

    @classmethod
    def open(cls, at: Opening, **parts: Any) -> "PositionalIndex":
        """Memory-map the positions and read the term offsets and vocabulary; their counts must agree."""
        folder = at.folder
        with at.reading(POSITIONS):
            positions = np.load(folder / POSITIONS, mmap_mode="r")
        with at.reading(INDPTR):
            indptr = np.load(folder / INDPTR)
        with at.reading(VOCAB):
            vocab = (folder / VOCAB).read_text(encoding="utf-8").split("\n")[:-1]
        if positions.ndim != 1 or indptr.ndim != 1 or len(indptr) == 0:
            raise at.damaged(f"{POSITIONS} or {INDPTR}", f"hold arrays of the wrong shape ({positions.shape} and {indptr.shape})")
        at.counts("term", {VOCAB: len(vocab), INDPTR: len(indptr) - 1, MANIFEST: at.manifest.get("terms")})
        at.counts("token", {POSITIONS: len(positions), INDPTR: int(indptr[-1]), MANIFEST: at.manifest.get("tokens")})
        return cls(folder, at.manifest, positions, indptr, vocab)

    def term_positions(self, term: str) -> np.ndarray:
        """Sorted stream positions of one term (empty if unknown)."""
        i = self.vocab.get(term)
        if i is None:
            return np.zeros(0, np.int64)
        return np.asarray(self.positions[self.indptr[i] : self.indptr[i + 1]])

    def _gram_positions(self, gram: Gram) -> np.ndarray:
        """Start positions of an n-gram; an empty string is a wildcard slot (skip-bigram)."""
        checkpoint()
        result = None
        for offset, term in enumerate(gram):
            if not term:
                continue
            shifted = self.term_positions(term) - offset
            result = shifted if result is None else np.intersect1d(result, shifted, assume_unique=True)
            if len(result) == 0:
                break
        return result if result is not None else np.zeros(0, np.int64)

    def pair_counts(self, xs: Sequence[Gram], ys: Sequence[Gram], window: int) -> np.ndarray:
        """(len(ys) x len(xs)) counts of occurrence pairs whose starts are at most ``window`` apart.

        Each pair is counted from its rarer side: the positions of every ``x`` rarer than ``y`` are
        looked up in ``y``'s postings in one vectorised call; commoner ones look ``y`` up in theirs.
        """
        counts = np.zeros((len(ys), len(xs)), dtype=np.int64)
        postings = [self.grams(x) for x in xs]
        sizes = np.array([len(p) for p in postings])
        for row, y in enumerate(ys):
            checkpoint()
            py = self.grams(y)
            if len(py) == 0 or not xs:
                continue
            rare = np.flatnonzero((sizes < len(py)) & (sizes > 0))
            if len(rare):
                probes = np.concatenate([postings[i] for i in rare])
                hits = np.searchsorted(py, probes + window, "right") - np.searchsorted(py, probes - window, "left")
                counts[row, rare] = np.add.reduceat(hits, np.concatenate([[0], np.cumsum(sizes[rare])[:-1]]))
            for i in np.flatnonzero(sizes >= len(py)):
                px = postings[i]
                counts[row, i] = int((np.searchsorted(px, py + window, "right") - np.searchsorted(px, py - window, "left")).sum())
        return counts
