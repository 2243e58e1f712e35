"""Top-k inner-product search over a dense index's vectors, by one of several backends.

A dense index is a FAISS index on disk; where its vectors are searched is a backend, chosen by name
or, by default, the first in ``BACKENDS`` that fits the index and the encoder's device:

- ``faiss-gpu``: the FAISS index moved to the first GPU, where the installed FAISS has GPU support;
- ``torch``: exact search with torch on a GPU, for flat indexes (the vectors are read out of the
  FAISS index once when opened and kept on the device in fp32, so that the scores are the CPU's to
  rounding: fp16 would move near neighbours past each other);
- ``faiss``: the FAISS index where it is, on the CPU (any kind: flat, HNSW, IVF).

Every backend answers as FAISS does: per query ``k`` scores, best first, and their row ids, ``-1``
(score ``-FLT_MAX``) past the last vector. Among equal scores the torch backend keeps the lowest ids,
in increasing order; FAISS keeps whichever its heap met first, so equal scores may carry other ids.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from openqa.errors import UsageError

#: The most hits a query may ask for (past it the answer's arrays alone could fill the memory).
MAX_K = 1_000_000
#: The score FAISS gives the places past the last vector (and ``-1`` as their id).
MISSING_SCORE = float(np.finfo(np.float32).min)


class VectorSearch(ABC):
    """Inner-product top-k over a fixed set of vectors."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def fits(cls, index: Any, device: str) -> bool:
        """Whether this backend serves the FAISS ``index`` for an encoder on ``device`` by default."""

    @classmethod
    @abstractmethod
    def open(cls, index: Any, device: str) -> "VectorSearch":
        """The backend over the FAISS ``index``'s vectors, on ``device`` where it computes on one."""

    @abstractmethod
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """float32 scores and int64 ids, each (len(queries), k), best first (see the module)."""


class FaissSearch(VectorSearch):
    """The FAISS index itself, on the CPU."""

    name = "faiss"

    def __init__(self, index: Any) -> None:
        self.index = index

    @classmethod
    def fits(cls, index: Any, device: str) -> bool:
        return True

    @classmethod
    def open(cls, index: Any, device: str) -> "FaissSearch":
        return cls(index)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        scores, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, ids


class FaissGpuSearch(FaissSearch):
    """The FAISS index copied to the first GPU (FAISS builds with GPU support only)."""

    name = "faiss-gpu"

    @classmethod
    def fits(cls, index: Any, device: str) -> bool:
        import faiss

        return device.startswith("cuda") and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0

    @classmethod
    def open(cls, index: Any, device: str) -> "FaissGpuSearch":
        import faiss

        if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
            raise UsageError("the faiss-gpu search needs a FAISS built with GPU support and a GPU it sees")
        return cls(faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index))


class TorchExactSearch(VectorSearch):
    """Exact inner-product top-k with torch, over ``vectors`` kept on ``device`` in fp32; ties go to
    the lowest ids. ``search(queries, k)`` answers as FAISS does: float32 scores and int64 ids, each
    (len(queries), k), best first, id ``-1`` past the last vector.

    :param vectors: the (n, dim) vectors searched (float32; a FAISS flat index's, or any).
    :param device: where they are kept and the products computed (``cpu``, ``cuda``).
    """

    name = "torch"
    #: Scores computed at once (queries x vectors), with the masks beside them: bounds the memory.
    CELLS = 1 << 25

    def __init__(self, vectors: np.ndarray, device: str = "cpu") -> None:
        import torch

        from openqa import arguments as arg

        self.device = torch.device(arg.device("device", device) or "cpu")
        self.vectors = torch.as_tensor(float32_rows("vectors", vectors)).to(self.device)

    @classmethod
    def fits(cls, index: Any, device: str) -> bool:
        import faiss

        from openqa import arguments as arg

        return arg.text("device", device).startswith("cuda") and isinstance(index, faiss.IndexFlat) and index.metric_type == faiss.METRIC_INNER_PRODUCT

    @classmethod
    def open(cls, index: Any, device: str) -> "TorchExactSearch":
        import faiss

        if not (isinstance(index, faiss.IndexFlat) and index.metric_type == faiss.METRIC_INNER_PRODUCT):
            raise UsageError("the torch search reads a flat inner-product index (built with --faiss-index flat)")
        return cls(index.reconstruct_n(0, index.ntotal), device)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        from openqa import arguments as arg

        if arg.whole("k", k, 1) > MAX_K:  # the result arrays are (queries, k)
            raise UsageError(f"k must be at most {MAX_K:,}, not {k}")
        queries = float32_rows("queries", queries)
        n, dim = self.vectors.shape
        if len(queries) and queries.shape[1] != dim:
            raise UsageError(f"queries must have the vectors' {dim} dimensions, not {queries.shape[1]}")
        scores = np.full((len(queries), k), MISSING_SCORE, np.float32)
        ids = np.full((len(queries), k), -1, np.int64)
        if n == 0 or len(queries) == 0:
            return scores, ids
        step = max(1, self.CELLS // n)
        found = min(k, n)
        with torch.inference_mode():
            for start in range(0, len(queries), step):
                block = torch.as_tensor(np.ascontiguousarray(queries[start:start + step], dtype=np.float32)).to(self.device)
                best, rows = self._top(block @ self.vectors.T, found)
                scores[start:start + len(block), :found] = best.cpu().numpy()
                ids[start:start + len(block), :found] = rows.cpu().numpy()
        return scores, ids

    @staticmethod
    def _top(products: Any, k: int) -> tuple[Any, Any]:
        """The ``k`` best of each row of ``products``, best first; among equal scores the lowest ids,
        in increasing order (``torch.topk`` alone leaves both to chance)."""
        import torch

        kth = torch.topk(products, k, dim=1).values[:, -1:]
        above = products > kth
        tied = products == kth
        wanted = k - above.sum(dim=1, keepdim=True)  # >= 1: fewer than k scores beat the k-th
        chosen = above | (tied & (torch.cumsum(tied, dim=1) <= wanted))
        rows = chosen.nonzero()[:, 1].view(len(products), k)  # exactly k a row, ids increasing
        best = products.gather(1, rows)
        order = torch.sort(best, dim=1, descending=True, stable=True).indices
        return best.gather(1, order), rows.gather(1, order)


def float32_rows(name: str, values: Any) -> np.ndarray:
    """``values`` as a C-contiguous float32 array of rows (n, dim), refused in one line unless it is a
    2-D array (or list of rows) of finite numbers that float32 holds."""
    if not isinstance(values, (np.ndarray, list, tuple)):
        raise UsageError(f"{name} must be a 2-D array of numbers (one row a vector), not {type(values).__name__}")
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            array = np.ascontiguousarray(values, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name} must be a 2-D array of numbers (one row a vector)") from None
    if array.ndim != 2:
        raise UsageError(f"{name} must be a 2-D array (one row a vector), not {array.ndim}-D")
    if not np.isfinite(array).all():
        raise UsageError(f"{name} must hold finite numbers float32 holds (no NaN, no infinity, none past 3.4e38)")
    return array


#: The backends by name, in the order the default tries them.
BACKENDS: dict[str, type[VectorSearch]] = {cls.name: cls for cls in (FaissGpuSearch, TorchExactSearch, FaissSearch)}


def open_search(index: Any, device: str = "cpu", name: str | None = None) -> VectorSearch:
    """The backend ``name`` over the FAISS ``index`` for an encoder on ``device``; without a name the
    first of ``BACKENDS`` that fits (FAISS on the GPU, else torch on the GPU for a flat index, else FAISS)."""
    if name is not None and name not in BACKENDS:
        raise UsageError(f"unknown vector search {name!r}: choose one of {', '.join(BACKENDS)}")
    chosen = BACKENDS[name] if name is not None else next(cls for cls in BACKENDS.values() if cls.fits(index, device))
    return chosen.open(index, device)
