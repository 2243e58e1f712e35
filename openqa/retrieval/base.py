"""The interface every retrieval engine implements, and the paragraph store they share."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Sequence

from openqa.corpus.paragraphs import Paragraph
from openqa.retrieval.manifest import MANIFEST, check_counts, loading
from openqa.text.tokenize import DEFAULT_CONFIGS, Tokenizer

PARAGRAPHS = "paragraphs.jsonl"


@dataclass(frozen=True)
class EngineOptions:
    """Engine-specific settings from the command line; each engine reads only the ones it knows."""

    connection: str | None = None  # elasticsearch: the server URL
    encoder: str | None = None  # dense: model name, local folder or hub id
    models_dir: Path | None = None  # dense: where model names are looked up first
    faiss_index: str = "flat"  # dense: flat, hnsw or ivf


@dataclass(frozen=True)
class Hit:
    """A retrieved paragraph: its row in the engine's paragraph store and its score."""

    index: int
    score: float


class ParagraphStore:
    """Paragraph texts of an index, read from disk only when first needed (display, readers).

    A store that cannot be parsed, or holds other than the ``rows`` paragraphs the manifest
    records, is refused with the damaged-index error naming ``build_hint``.
    """

    def __init__(self, path: Path, rows: int | None = None, build_hint: str | None = None) -> None:
        self.path = path
        self.rows = rows
        self.build_hint = build_hint
        self._items: list[Paragraph] | None = None

    @staticmethod
    def write(path: Path, paragraphs: Iterable[Paragraph]) -> None:
        """Store paragraphs one JSON object per line, in index order."""
        with open(path, "w", encoding="utf-8") as out:
            for p in paragraphs:
                out.write(json.dumps({"id": p.pid, "book": p.book, "contents": p.text}, ensure_ascii=False))
                out.write("\n")

    def __getitem__(self, index: int) -> Paragraph:
        if self._items is None:
            self._items = self._read()
        return self._items[index]

    def _read(self) -> list[Paragraph]:
        """All paragraphs; a row that is not a JSON object with id, book and contents is damage."""
        folder, name = self.path.parent, self.path.name
        with loading(folder, name, self.build_hint, errors=(TypeError,)), open(self.path, encoding="utf-8") as lines:
            items = [Paragraph(row["id"], row["book"], row["contents"]) for row in map(json.loads, lines)]
        check_counts(folder, "paragraph", {name: len(items), MANIFEST: self.rows}, self.build_hint)
        return items


class Index(ABC):
    """Something ``openqa index`` builds from paragraphs and later opens, with a manifest."""

    name: ClassVar[str]
    #: Tokenizer settings per language when the user changes none.
    tokenizers: ClassVar[dict[str, dict[str, Any]]] = DEFAULT_CONFIGS
    #: Whether building from the textbooks takes seconds, so that ``eval`` and ``answer`` build a
    #: missing index themselves instead of asking for ``openqa index``.
    quick_build: ClassVar[bool] = False
    tokenizer: Tokenizer
    manifest: dict[str, Any]

    @classmethod
    def check_options(cls, options: EngineOptions) -> None:
        """Refuse options this engine cannot use (a malformed server URL) before any work is done."""

    @classmethod
    @abstractmethod
    def build(
        cls, folder: Path, paragraphs: Sequence[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
    ) -> None:
        """Index ``paragraphs`` into ``folder`` atomically; ``corpus`` (checksum, books) goes in the manifest.

        ``options`` carries engine-specific settings (a server URL, an encoder); engines ignore the rest.
        """

    @classmethod
    @abstractmethod
    def load(cls, folder: Path, expected: dict[str, Any], build_hint: str, options: EngineOptions = EngineOptions()) -> "Index":
        """Open the index in ``folder``, refusing one whose manifest differs from ``expected``."""


class SearchEngine(Index):
    """An index that answers text queries with ranked paragraphs."""

    paragraphs: ParagraphStore
    #: How many queries one ``search`` call handles best (one question's options for sparse
    #: engines, many for an encoder that batches).
    query_batch: ClassVar[int] = 1

    def fit_queries(self, queries: Sequence[str]) -> None:
        """See the whole batch of queries before searching (e.g. their average length)."""

    @abstractmethod
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` hits (best first) for each query; queries of one question go together."""
