"""Word embeddings trained on the textbooks (gensim word2vec, 200-d), for the Max-out reader.

Words are lower-cased English words or jieba words (Chinese), stop words kept: the reader reads
whole sentences. Built by ``openqa index --engine word2vec`` with a manifest like every index.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.languages import language
from openqa.retrieval.base import EngineOptions, Index, Opening
from openqa.retrieval.manifest import MANIFEST, atomic_folder, write_manifest
from openqa.text.tokenize import Tokenizer, make_tokenizer

VECTORS = "vectors.npy"
VOCAB = "vocab.json"
DIM = 200


def stable_hash(text: str) -> int:
    """A hash of ``text`` that is the same in every process (seeds each word's initial vector)."""
    return zlib.crc32(text.encode("utf-8"))
PAD, UNK = "<pad>", "<unk>"
_EN_WORD = re.compile(r"[a-z0-9]+")


def words(text: str, lang: str) -> list[str]:
    """The reader's words: lower-cased English words, or jieba words for Chinese."""
    if language(lang).spaced:
        return _EN_WORD.findall(text.lower())
    import jieba

    return [w for w in jieba.lcut(text.lower(), HMM=False) if w.strip()]


class WordVectors(Index):
    """A vocabulary (row 0 padding, row 1 unknown) and its 200-d vectors."""

    name = "word2vec"
    extra = "readers"
    summary = "word vectors of the textbooks, for the maxout reader"
    #: Vectors of words, not paragraphs: no paragraph store.
    stores_paragraphs = False

    def __init__(self, manifest: dict[str, Any], vocab: list[str], vectors: np.ndarray) -> None:
        self.manifest = manifest
        self.tokenizer: Tokenizer = make_tokenizer(manifest["tokenizer"])
        self.vocab = vocab
        self.ids = {w: i for i, w in enumerate(vocab)}
        self.vectors = vectors

    @classmethod
    def build(
        cls, folder: Path, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
    ) -> None:
        """Train word2vec (skip-gram, window 5, words seen 3+ times, 5 epochs) on the paragraphs,
        the same vectors on every run: one worker thread and a seeding hash that does not change
        between processes (gensim's default, Python's ``hash``, is salted per process).

        The one engine that holds its input: gensim reads the sentences once per epoch, so the
        stream's words are kept (a list of word lists; fine for textbook-sized corpora)."""
        from gensim.models import Word2Vec

        sentences = [words(p.text, tokenizer.lang) for p in paragraphs]
        if not any(count >= 3 for count in Counter(w for sentence in sentences for w in sentence).values()):
            raise OpenQAError("cannot train word vectors: no word occurs 3 or more times in the corpus")
        model = Word2Vec(sentences, vector_size=DIM, window=5, min_count=3, sg=1, epochs=5, workers=1, seed=13,
                         hashfxn=stable_hash)
        vocab = [PAD, UNK, *model.wv.index_to_key]
        vectors = np.vstack([np.zeros((2, DIM), np.float32), model.wv.vectors.astype(np.float32)])
        with atomic_folder(folder) as scratch:
            np.save(scratch / VECTORS, vectors)
            (scratch / VOCAB).write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
            write_manifest(scratch, {"engine": cls.name, **corpus, "tokenizer": tokenizer.config(), "dim": DIM, "words": len(vocab)})

    @classmethod
    def open(cls, at: Opening, **parts: Any) -> "WordVectors":
        """Read the vocabulary and vectors; their word counts and size must agree with the manifest."""
        with at.reading(VOCAB):
            vocab = json.loads((at.folder / VOCAB).read_text(encoding="utf-8"))
        with at.reading(VECTORS):
            vectors = np.load(at.folder / VECTORS)
        if not isinstance(vocab, list) or not all(isinstance(word, str) for word in vocab):
            raise at.damaged(VOCAB, "is not a JSON list of words")
        if vectors.ndim != 2:
            raise at.damaged(VECTORS, f"holds an array of shape {vectors.shape}, not a matrix")
        at.counts("word", {VOCAB: len(vocab), VECTORS: vectors.shape[0], MANIFEST: at.manifest.get("words")})
        at.counts("dimension", {VECTORS: vectors.shape[1], MANIFEST: at.manifest.get("dim")})
        manifest = at.manifest
        return cls(manifest, vocab, vectors)
