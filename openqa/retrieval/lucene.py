"""Lucene BM25 through Anserini (Pyserini's Java side), over exactly the paragraphs (and ids) of the custom index.

Text is analysed by this project's tokenizer and indexed pre-tokenized, so Lucene sees the same
terms as IR-Custom: Snowball-stemmed English words without stop words, or Chinese characters
with character bigrams (a superset of Lucene's CJK bigram analyzer). Queries go through the same
tokenizer and a whitespace analyzer. Lucene doc ids are the paragraphs' rows in the store.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.languages import language
from openqa.progress import tqdm
from openqa.retrieval.base import (
    PARAGRAPHS,
    EngineOptions,
    Hit,
    Opening,
    ParagraphStore,
    SearchEngine,
    StoreWriter,
    batches,
)
from openqa.retrieval.jvm import java_class
from openqa.retrieval.manifest import atomic_folder, write_manifest
from openqa.text.tokenize import Tokenizer, make_tokenizer

LUCENE_DIR = "lucene"
BATCH = 2000


@dataclass(frozen=True)
class LuceneParams:
    """BM25 parameters of the searcher (Elasticsearch's defaults, as the paper's IR-ES)."""

    k1: float = 1.2
    b: float = 0.75


def pretokenized(tokenizer: Tokenizer, text: str) -> str:
    """The tokenizer's terms joined by spaces, for Lucene's whitespace analysis."""
    return " ".join(t for t in tokenizer.tokenize(text) if " " not in t)


class LuceneBM25(SearchEngine):
    """Anserini's ``SimpleSearcher`` (what Pyserini's ``LuceneSearcher`` wraps) with BM25, behind the
    common engine interface."""

    name = "lucene"
    extra = "lucene"
    in_jvm = True
    summary = "Lucene through Pyserini, for ir-es"

    def __init__(self, folder: Path, manifest: dict[str, Any], paragraphs: ParagraphStore) -> None:
        self.folder = folder
        self.manifest = manifest
        self.tokenizer = make_tokenizer(manifest["tokenizer"])
        self.paragraphs = paragraphs
        self.searcher = java_class("io.anserini.search.SimpleSearcher")(str(folder / LUCENE_DIR))
        self.searcher.set_analyzer(java_class("org.apache.lucene.analysis.core.WhitespaceAnalyzer")())
        params = LuceneParams()
        self.searcher.set_bm25(float(params.k1), float(params.b))
        #: Calls into the JVM go one at a time (a thread's first call attaches it to the JVM).
        self._jvm = threading.Lock()

    @property
    def documents(self) -> int:
        """How many documents the Lucene index holds."""
        with self._jvm:
            return int(self.searcher.get_total_num_docs())

    @classmethod
    def build(
        cls, folder: Path, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
    ) -> None:
        """Index the stream of paragraphs pre-tokenized into ``folder/lucene`` atomically, ids = rows.

        Anserini's ``SimpleIndexer`` (what Pyserini's ``LuceneIndexer`` wraps) gets the paragraphs in
        batches as they are read (the paragraph store is written as they pass); on Ctrl-C or a
        failure its writer is rolled back (nothing committed, merges stopped) before the scratch
        folder is removed.
        """
        config = tokenizer.config()
        if language(config["lang"]).spaced and config.get("ngram", 1) > 1:
            raise OpenQAError("the Lucene engine indexes single words: build it without --ngram 2 for English")
        indexer_class = java_class("io.anserini.index.SimpleIndexer")
        document = java_class("io.anserini.collection.JsonCollection$Document").fromFields
        with atomic_folder(folder) as scratch:
            indexer = indexer_class(["-index", str(scratch / LUCENE_DIR), "-pretokenized", "-input", "",
                                     "-collection", "JsonCollection", "-threads", "1"])
            store = StoreWriter(scratch / PARAGRAPHS)
            try:
                passing = tqdm(store.passing(paragraphs), desc="indexing (lucene)", unit="para")
                for batch in batches(passing, BATCH):
                    start = store.rows - len(batch)
                    indexer.addJsonDocuments([document(str(start + i), pretokenized(tokenizer, p.text))
                                              for i, p in enumerate(batch)])
            except BaseException:  # Ctrl-C or a failure: drop the half-built index without committing it
                indexer.writer.rollback()
                raise
            indexer.close()
            write_manifest(
                scratch,
                {"engine": cls.name, **corpus, "tokenizer": tokenizer.config(), "paragraphs": store.rows,
                 "analysis": "pre-tokenized by openqa, whitespace analyzer"},
            )

    @classmethod
    def open(cls, at: Opening, **parts: Any) -> "LuceneBM25":
        """Open the Lucene index; it must hold one document per paragraph of the store."""
        assert at.store is not None  # the engine stores paragraphs: load opened the store
        engine = cls(at.folder, at.manifest, at.store)
        at.at_most_paragraphs(LUCENE_DIR, engine.documents)
        return engine

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        tok = self.tokenizer
        out = []
        for q in queries:
            text = pretokenized(tok, tok.prepare_query(q))
            with self._jvm:
                hits = self.searcher.search(text, k) if text else []
                out.append([Hit(int(h.docid), float(h.score)) for h in hits])
        return out
