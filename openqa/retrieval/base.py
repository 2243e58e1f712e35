"""The interface every retrieval engine implements, and the paragraph store they share."""

from __future__ import annotations

import json
import mmap
import os
import threading
from abc import ABC, abstractmethod
from array import array
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import IO, Any, Callable, ClassVar, Iterable, Iterator, Sequence, TypedDict, TypeVar

import numpy as np

from openqa.cancel import checkpoint
from openqa.corpus.paragraphs import Paragraph
from openqa.errors import UsageError
from openqa.retrieval.manifest import (
    MANIFEST,
    check_counts,
    check_manifest,
    damaged,
    loading,
    mismatch,
    read_manifest,
    replaced,
)
from openqa.text.tokenize import DEFAULT_CONFIGS, Tokenizer

PARAGRAPHS = "paragraphs.jsonl"
#: Where each row of the paragraph store starts, in bytes (and, last, the store's size), so that a
#: paragraph is read without the others; a store written before offsets were is read whole.
OFFSETS = "paragraphs.offsets.npy"

T = TypeVar("T")


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


@dataclass(frozen=True)
class Ranking:
    """Hits of many queries as arrays: row q holds ``counts[q]`` paragraph rows (``rows[q]``) and
    their scores (``scores[q]``), best first, then padding. An engine that ranks into arrays gives
    its hits so, without a Python object per hit; ``hits()`` makes the ``Hit`` objects."""

    rows: np.ndarray
    scores: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, hits: list[list[Hit]]) -> Ranking:
        """The ranking of ``hits`` (its scores float64: exactly the hits' floats)."""
        width = max(map(len, hits), default=0)
        rows, scores = np.full((len(hits), width), -1, np.int64), np.zeros((len(hits), width), np.float64)
        for q, found in enumerate(hits):
            rows[q, : len(found)] = [h.index for h in found]
            scores[q, : len(found)] = [h.score for h in found]
        return cls(rows, scores, np.fromiter(map(len, hits), np.int64, len(hits)))

    def hits(self) -> list[list[Hit]]:
        """The hits of each query as ``Hit`` objects."""
        return [
            list(map(Hit, rows[:n], scores[:n]))
            for rows, scores, n in zip(self.rows.tolist(), self.scores.tolist(), self.counts.tolist())
        ]


class QueryStatistics(TypedDict, total=False):
    """What ``SearchEngine.query_statistics`` measures, under the names of the ``IRSettings`` fields
    they set: IR-Custom's avgQL."""

    avg_ql: float


class ParagraphStore:
    """Paragraph texts of an index, read from disk only when needed (display, readers): one row at
    a time through the store's offsets (memory-mapped), so a store of millions of paragraphs costs
    no memory; a store without offsets (built before them) is read whole at first use.

    A store that cannot be parsed, or holds other than the ``rows`` paragraphs the manifest
    records, is refused with the damaged-index error naming ``build_hint``. The store file is the
    one seen when the index was opened (``check``): one that an index rebuilt since has put in its
    place is refused as such (``replaced``), not read with the old offsets as damage.
    """

    #: Paragraphs kept decoded (a question's options find many of the same ones).
    CACHED = 8192

    def __init__(self, path: Path, rows: int | None = None, build_hint: str | None = None) -> None:
        self.path = path
        self.rows = rows
        self.build_hint = build_hint
        self._offsets: np.ndarray | None = None
        self._items: list[Paragraph] | None = None
        self._map: mmap.mmap | None = None
        self._opening = threading.Lock()
        self._row = lru_cache(self.CACHED)(self._decode)
        #: The store file's (device, inode) when the index was opened (None: not there).
        self._opened: tuple[int, int] | None = None

    def check(self) -> None:
        """Compare the store with the manifest's paragraph count now: with offsets this reads only
        their length (memory-mapped); a store written before offsets is checked when first read.
        The store file seen now is the one later reads must find."""
        if self._opened is None:
            try:
                seen = self.path.stat()
                self._opened = (seen.st_dev, seen.st_ino)
            except OSError:  # a missing store is refused as damage when it is read
                pass
        if self._offsets is None and self.path.with_name(OFFSETS).is_file():
            self._offsets = self._read_offsets()

    def _open(self) -> IO[bytes]:
        """The store file, refused (``replaced``) where it is not the file ``check`` saw: the index was
        rebuilt since it was opened, and the offsets and counts read then are another build's."""
        store = open(self.path, "rb")
        seen = os.fstat(store.fileno())
        if self._opened is not None and (seen.st_dev, seen.st_ino) != self._opened:
            store.close()
            raise replaced(self.path.parent)
        return store

    def __getitem__(self, index: int) -> Paragraph:
        return self.many([index])[0]

    def many(self, indices: Sequence[int]) -> list[Paragraph]:
        """Paragraphs ``indices``, in order: ``[store[i] for i in indices]`` with the store opened
        and the rows checked once for all (a search's hits are fetched together)."""
        if self._offsets is None and self._items is None:
            self.check()
            if self._offsets is None:
                self._items = self._read()
        if self._items is not None:
            return [self._items[i] for i in indices]
        assert self._offsets is not None  # no rows read: check() found the offsets
        rows = len(self._offsets) - 1
        if indices and not (0 <= min(indices) and max(indices) < rows):
            outside = next(index for index in indices if not 0 <= index < rows)
            raise IndexError(f"paragraph {outside} of {rows}")
        return list(map(self._row, indices))

    def _decode(self, index: int) -> Paragraph:
        """Row ``index`` read from the store, memory-mapped once (offsets are known here)."""
        assert self._offsets is not None
        start, end = int(self._offsets[index]), int(self._offsets[index + 1])
        with loading(self.path.parent, self.path.name, self.build_hint, errors=(TypeError,)):
            if self._map is None:
                with self._opening:
                    if self._map is None:
                        with self._open() as store:
                            self._map = mmap.mmap(store.fileno(), 0, access=mmap.ACCESS_READ) if end else None
            row = json.loads(self._map[start:end] if self._map is not None else b"")
            return Paragraph(row["id"], row["book"], row["contents"])

    def _read_offsets(self) -> np.ndarray:
        """The rows' offsets, memory-mapped; refused unless there is one per paragraph and the last
        is the store's size."""
        folder = self.path.parent
        with loading(folder, OFFSETS, self.build_hint):
            offsets: np.ndarray = np.load(folder / OFFSETS, mmap_mode="r")
        if offsets.ndim != 1 or len(offsets) == 0:
            raise damaged(folder, OFFSETS, f"holds an array of shape {offsets.shape}", self.build_hint)
        check_counts(folder, "paragraph", {OFFSETS: len(offsets) - 1, MANIFEST: self.rows}, self.build_hint)
        check_counts(folder, "store size", {self.path.name: self.path.stat().st_size, OFFSETS: int(offsets[-1])}, self.build_hint)
        return offsets

    def _read(self) -> list[Paragraph]:
        """All paragraphs; a row that is not a JSON object with id, book and contents is damage."""
        folder, name = self.path.parent, self.path.name
        with loading(folder, name, self.build_hint, errors=(TypeError,)), self._open() as store:
            items = [Paragraph(row["id"], row["book"], row["contents"]) for row in map(json.loads, store)]
        check_counts(folder, "paragraph", {name: len(items), MANIFEST: self.rows}, self.build_hint)
        return items


class StoreWriter:
    """Writes an index's paragraph store while its engine reads the corpus, so one pass over the
    corpus feeds both and no paragraph is held; ``rows`` is how many passed, known at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = 0

    def passing(self, paragraphs: Iterable[Paragraph]) -> Iterator[Paragraph]:
        """Each paragraph, after storing it (one JSON object per line, in index order); the rows'
        offsets (``OFFSETS``, 8 bytes a row) are written when the stream ends."""
        offsets = array("q", [0])
        with open(self.path, "wb") as out:
            for p in paragraphs:
                line = (json.dumps({"id": p.pid, "book": p.book, "contents": p.text}, ensure_ascii=False) + "\n").encode("utf-8")
                out.write(line)
                offsets.append(offsets[-1] + len(line))
                self.rows += 1
                yield p
        np.save(self.path.with_name(OFFSETS), np.frombuffer(offsets, np.int64))


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last may be shorter), read as they are needed."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def term_ids(term_lists: list[list[str]], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The terms of a batch of paragraphs as one array of vocabulary ids (terms new to ``vocab`` are
    added in order of first occurrence), and each paragraph's length in terms."""
    lengths = np.fromiter(map(len, term_lists), np.int64, len(term_lists))
    ids = np.fromiter((vocab.setdefault(t, len(vocab)) for terms in term_lists for t in terms), np.int64, int(lengths.sum()))
    return ids, lengths


class Index(ABC):
    """Something ``openqa index`` builds from paragraphs and later opens, with a manifest.

    Opening is shared (``load``): the manifest is read and its files checked, the engine, format and
    settings compared with what the caller expects, and the paragraph count compared with the
    paragraph store; only then does the engine's own ``open`` read its files. Every refusal is the
    one-line error of ``openqa.retrieval.manifest`` naming the file and the rebuild command.
    """

    name: ClassVar[str]
    #: The install extra whose packages the engine needs (None: the core has them; ``openqa.extras``).
    extra: ClassVar[str | None] = None
    #: Whether it calls into a JVM (a server runs the methods over it on one long-lived thread).
    in_jvm: ClassVar[bool] = False
    #: One line for ``--help``.
    summary: ClassVar[str] = ""
    #: Tokenizer settings per language when the user changes none.
    tokenizers: ClassVar[dict[str, dict[str, Any]]] = DEFAULT_CONFIGS
    #: Whether building from the textbooks takes seconds, so that ``eval`` and ``answer`` build a
    #: missing index themselves instead of asking for ``openqa index``.
    quick_build: ClassVar[bool] = False
    #: Manifest entries every index of this engine holds, whoever opens it (the scoring formula).
    identity: ClassVar[dict[str, Any]] = {}
    #: Whether the index keeps a paragraph store whose rows its hits name.
    stores_paragraphs: ClassVar[bool] = True
    tokenizer: Tokenizer
    manifest: dict[str, Any]

    def warm(self) -> None:
        """Load now what the first query would load (the Chinese script converter, jieba's
        dictionary), so that a server's first request does not pay for it (nor, while one loads
        in a single call that holds the GIL, every other request)."""
        text = self.tokenizer.prepare_query("warm 热身")
        self.tokenizer.tokenize(text)
        self.tokenizer.words(text)  # what evidence is marked with (jieba's words, whatever the index's mode)

    @classmethod  # noqa: B027  (a hook that most engines leave empty: they take any options)
    def check_options(cls, options: EngineOptions) -> None:
        """Refuse options this engine cannot use (a malformed server URL) before any work is done."""

    @classmethod
    @abstractmethod
    def build(
        cls, folder: Path, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(),
    ) -> None:
        """Index ``paragraphs`` into ``folder`` atomically; ``corpus`` (checksum, books) goes in the manifest.

        ``paragraphs`` is read once, as a stream (a corpus can be larger than memory): engines
        count it as it passes and keep only what their index holds. ``options`` carries
        engine-specific settings (a server URL, an encoder); engines ignore the rest.
        """

    @classmethod
    def rebuild_command(cls, build_hint: str, options: EngineOptions, manifest: dict[str, Any] | None) -> str:
        """The command that rebuilds this index, as errors give it (an engine needing more, such as
        a server URL, adds it)."""
        return build_hint

    @classmethod
    def load(
        cls, folder: Path, expected: dict[str, Any], build_hint: str, options: EngineOptions = EngineOptions(), **parts: Any,
    ) -> "Index":
        """Open the index in ``folder``, refusing one whose manifest differs from ``expected`` or
        whose files disagree with it; ``parts`` are ready-made components an engine may take
        instead of making its own (an encoder, a server client: tests pass fakes)."""
        folder = Path(folder)
        manifest = read_manifest(folder, cls.rebuild_command(build_hint, options, None))
        hint = cls.rebuild_command(build_hint, options, manifest)
        check_manifest(manifest, {"engine": cls.name, **cls.identity, **expected}, folder, hint)
        store = None
        if cls.stores_paragraphs:
            rows = manifest.get("paragraphs")
            if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
                raise damaged(folder, MANIFEST, f"records {rows!r} paragraphs, not a positive count", hint)
            store = ParagraphStore(folder / PARAGRAPHS, rows, hint)
            store.check()
        return cls.open(Opening(folder, manifest, hint, options, store), **parts)

    @classmethod
    @abstractmethod
    def open(cls, at: "Opening", **parts: Any) -> "Index":
        """The engine's own part of opening: read its files, check their counts (paragraphs against
        ``at.manifest["paragraphs"]``, which the store has confirmed) and make the engine."""


@dataclass(frozen=True)
class Opening:
    """What the shared part of ``Index.load`` found, for an engine's ``open``: the folder, its checked
    manifest, the rebuild command errors name, the command's options and the paragraph store."""

    folder: Path
    manifest: dict[str, Any]
    hint: str
    options: EngineOptions
    store: ParagraphStore | None

    @property
    def paragraphs(self) -> int:
        """How many paragraphs the manifest records (and the store holds)."""
        return int(self.manifest["paragraphs"])

    def counts(self, what: str, counts: dict[str, Any]) -> None:
        """Refuse the index unless the files' ``counts`` of ``what`` agree (see ``check_counts``)."""
        check_counts(self.folder, what, counts, self.hint)

    def reading(self, file: str, errors: tuple[type[BaseException], ...] = ()) -> Any:
        """A block in which a parse failure of ``file`` becomes the damaged-index error."""
        return loading(self.folder, file, self.hint, errors)

    def at_most_paragraphs(self, source: str, documents: int) -> None:
        """Refuse an index whose ``source`` holds more documents than the manifest has paragraphs
        (their ids are paragraph rows). Fewer is allowed: a paragraph with no index term (only stop
        words, say) is not a document of Lucene's."""
        if documents > self.paragraphs:
            raise self.damaged(source, f"holds {documents} documents but {MANIFEST} records {self.paragraphs} paragraphs")

    def damaged(self, file: str, what: str) -> Exception:
        """The damaged-index error for ``file``."""
        return damaged(self.folder, file, what, self.hint)

    def mismatch(self, what: str, hint: str | None = None) -> Exception:
        """The error for an index built another way than asked (``hint``: a rebuild command that
        differs from the index's own, with the option asked for)."""
        return mismatch(self.folder, what, hint or self.hint)


class SearchEngine(Index):
    """An index that answers text queries with ranked paragraphs.

    Searching changes nothing in the engine: everything a search depends on (the query texts, the
    depth, an engine's query-side parameters such as IR-Custom's kQ, bQ and avgQL) is an argument
    of the call, so one opened engine serves any number of threads and methods at once.
    """

    paragraphs: ParagraphStore
    #: How many queries one batch of ``search`` handles best (one question's options for sparse
    #: engines, many for an encoder that batches).
    query_batch: ClassVar[int] = 1

    def warm(self) -> None:
        """Also read the paragraph store, which the first hit would."""
        super().warm()
        self.paragraphs[0]

    def search(
        self, queries: Sequence[str], k: int, params: Any = None, progress: Callable[[int], None] | None = None,
        threads: int | None = None,
    ) -> list[list[Hit]]:
        """Top-``k`` hits (best first) for each query, in batches of ``query_batch`` queries; queries
        of one question go together. ``params`` are query-side parameters of engines that have them
        (others ignore them); ``progress`` is told how many queries each batch finished; ``threads``
        is for engines that search on threads of their own (others search their batches in turn)."""
        out: list[list[Hit]] = []
        for batch in batches(queries, self.query_batch):
            checkpoint()
            out += self.search_batch(batch, k)
            if progress:
                progress(len(batch))
        return out

    def ranking(self, queries: Sequence[str], k: int, params: Any = None, threads: int | None = None) -> Ranking:
        """The hits of ``search`` as a ``Ranking`` (an engine that ranks into arrays returns them
        as they are: what ``Searcher`` reads)."""
        return Ranking.of(self.search(queries, k, params, threads=threads))

    @abstractmethod
    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` hits for each query of one batch."""

    def query_params(self, params: Any) -> dict[str, Any]:
        """``params`` (None: the engine's defaults) as a record: none for an engine without
        query-side parameters."""
        return {}

    def with_query_params(self, params: Any, values: dict[str, Any]) -> Any:
        """``params`` with ``values`` set, checked; an engine without query-side parameters refuses any."""
        if values:
            raise UsageError(f"the {self.name} engine has no query-side parameters to set (given {', '.join(sorted(values))})")
        return params

    def query_statistics(self, queries: Sequence[str]) -> QueryStatistics:
        """Query-side quantities of a set of queries that the engine's scoring reads as fixed
        parameters (IR-Custom's avgQL), which ``openqa tune`` measures on the exam's dev queries and
        records with the settings: none by default."""
        return {}
