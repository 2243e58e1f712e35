"""The compiled search kernel of the custom BM25 engine: term rows in, each query's top k out.

numba compiles it (without the GIL, so threads search in parallel) and caches the machine code on
disk, so only the first process on a machine pays the compilation.

A *group* is up to ``LANES`` consecutive queries that share most of their terms: one question's
options, all holding the question. The kernel walks the union of the group's term rows once, in
ascending row order, and adds each posting's document weight times each query's query-side
weight into a buffer that interleaves the queries (paragraph-major, a float32 lane per query: one
vector operation a posting), so the postings, the costly part, are read once for the whole group. A query missing a term adds
0.0 there, which changes no float. Each paragraph's score is thus the same float32 sum, in the
same order, as the sparse product ``weights[rows].T @ query_weights`` that this engine computed
before: scores are bit-identical, and so are rankings, ties included.

Top-k: the buffer is scanned in blocks of ``SCAN_WIDTH`` scores; a block whose scores are all
at most the lowest of the lanes' current k-th best is skipped after one vectorised comparison,
and the rest feed a bounded heap per lane. The rule is higher score first, then lower paragraph
row: scanning in row order, a newcomer beats the heap's worst only with a strictly higher score.
The buffer is left all zeros for the next call.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core.base import BaseContext
from numba.core.typing.templates import Signature
from numba.extending import intrinsic

from openqa.config import user_cache_dir

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher

_Function = TypeVar("_Function", bound=Callable[..., Any])

#: Queries scored together in one pass over the postings (one question's options).
LANES = 4
#: Scores per block of the top-k scan (a multiple of every stride: 1 and ``LANES``).
SCAN_WIDTH = 512


def _private_cache_dir() -> str | None:
    """A numba cache folder under the system temp folder that only this user can write (made if
    missing), or None when the one there belongs to someone else or is open to others."""
    folder = Path(tempfile.gettempdir()) / f"openqa-numba-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.stat()
    except OSError:
        return None
    return str(folder) if info.st_uid == os.getuid() and not info.st_mode & 0o077 else None


def _compiled(function: _Function) -> Dispatcher[_Function]:
    """``function`` compiled by numba, GIL released, machine code cached on disk: in the folder
    ``NUMBA_CACHE_DIR`` names when the user set it; else in this user's cache folder, never inside
    the installed package (numba's default is next to the source); else in this user's private
    folder under the temp folder; failing all, compiled in each process. numba fixes a function's
    cache folder when it is decorated, so its setting is changed for that moment only (other numba
    code of the process keeps its own)."""
    if numba.config.CACHE_DIR:  # type: ignore[attr-defined]  # numba's config sets its names at run time
        try:
            return numba.njit(nogil=True, cache=True)(function)
        except RuntimeError:  # the folder the user named cannot be written: no cache
            return numba.njit(nogil=True)(function)
    cached = user_cache_dir("numba")
    folder = str(cached) if cached is not None else _private_cache_dir()
    if folder is None:
        return numba.njit(nogil=True)(function)
    numba.config.CACHE_DIR = folder  # type: ignore[attr-defined]
    try:
        return numba.njit(nogil=True, cache=True)(function)
    finally:
        numba.config.CACHE_DIR = ""  # type: ignore[attr-defined]


@_compiled
def _query_weight(count: int, norm: float, kq1: np.float32) -> np.float32:
    """Query-side saturation of a term found ``count`` times: count (kQ+1) / (count + norm), the
    numerator in float32 and the rest in float64, as numpy computed it from float32 counts."""
    c = np.float32(count)
    return np.float32(np.float64(c * kq1) / (np.float64(c) + norm))


@_compiled
def _worse(score_a: np.float32, row_a: int, score_b: np.float32, row_b: int) -> bool | np.bool_:
    """Whether hit a ranks below hit b: a lower score, or the same score at a higher row."""
    return score_a < score_b or (score_a == score_b and row_a > row_b)


@_compiled
def _swap(scores: np.ndarray, rows: np.ndarray, a: int, b: int) -> None:
    """Exchange heap entries ``a`` and ``b``."""
    scores[a], scores[b] = scores[b], scores[a]
    rows[a], rows[b] = rows[b], rows[a]


@_compiled
def _sift_up(scores: np.ndarray, rows: np.ndarray, pos: int) -> None:
    """Restore the heap (worst hit at the root) after placing a hit at ``pos``."""
    while pos > 0:
        parent = (pos - 1) // 2
        if not _worse(scores[pos], rows[pos], scores[parent], rows[parent]):
            return
        _swap(scores, rows, pos, parent)
        pos = parent


@_compiled
def _sift_down(scores: np.ndarray, rows: np.ndarray, size: int) -> None:
    """Restore the heap of ``size`` hits after replacing its root."""
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and _worse(scores[child + 1], rows[child + 1], scores[child], rows[child]):
            child += 1
        if not _worse(scores[child], rows[child], scores[pos], rows[pos]):
            return
        _swap(scores, rows, pos, child)
        pos = child


@_compiled
def _offer(scores: np.ndarray, rows: np.ndarray, size: int, score: np.float32, row: int) -> int:
    """Put a hit that beats the heap's worst into the heap of ``size`` hits (at most
    ``len(scores)``), replacing the worst when full; returns the new size."""
    if size < len(scores):
        scores[size] = score
        rows[size] = row
        _sift_up(scores, rows, size)
        return size + 1
    scores[0] = score
    rows[0] = row
    _sift_down(scores, rows, size)
    return size


@intrinsic
def _add_lanes(
    typingctx: object, buffer: types.Type, start: types.Type, value: types.Type, weights: types.Type,
) -> tuple[Signature, Callable[..., ir.Value]] | None:
    """``buffer[start:start + LANES] += value * weights`` (``weights`` a tuple of ``LANES``
    float32) as one vector load, multiply, add and store: numba leaves the lanes' scalar updates
    unvectorised (its SLP vectoriser is off), at about 1.5 times the cost. IEEE float32 either way,
    so the sums are the same. Unchecked: the caller keeps ``start + LANES`` within the buffer."""
    if not (isinstance(buffer, types.Array) and buffer.dtype == types.float32 and value == types.float32
            and weights == types.UniTuple(types.float32, LANES) and isinstance(start, types.Integer)):
        return None
    vector = ir.VectorType(ir.FloatType(), LANES)

    def codegen(context: BaseContext, builder: ir.IRBuilder, signature: Signature, args: tuple[ir.Value, ...]) -> ir.Value:
        array, offset, scalar, lanes = args
        data = context.make_array(signature.args[0])(context, builder, array).data
        pointer = builder.bitcast(builder.gep(data, [offset]), vector.as_pointer())
        factors = ir.Constant(vector, ir.Undefined)
        for lane in range(LANES):
            factors = builder.insert_element(factors, builder.extract_value(lanes, lane), ir.IntType(32)(lane))
        spread = builder.insert_element(ir.Constant(vector, ir.Undefined), scalar, ir.IntType(32)(0))
        spread = builder.shuffle_vector(spread, ir.Constant(vector, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))
        total = builder.fadd(builder.load(pointer, align=4, typ=vector), builder.fmul(spread, factors))
        builder.store(total, pointer, align=4)
        return context.get_dummy_value()

    return types.void(buffer, start, value, weights), codegen


@_compiled
def _add_postings(indices: np.ndarray, data: np.ndarray, weight: np.float32, buffer: np.ndarray) -> None:
    """Add one term row's postings times a lone query's weight into its buffer."""
    for j in range(indices.shape[0]):
        buffer[indices[j]] += data[j] * weight


@_compiled
def _add_postings_lanes(indices: np.ndarray, data: np.ndarray, weights: tuple[np.float32, ...], buffer: np.ndarray) -> None:
    """Add one term row's postings times each lane's query weight into the interleaved buffer."""
    for j in range(indices.shape[0]):
        # numba's stubs type the Python-side call (which raises) with the typing context first
        _add_lanes(buffer, np.uint64(indices[j]) * np.uint64(LANES), data[j], weights)  # type: ignore[call-arg, arg-type]


@_compiled
def rank_groups(
    n_docs: int, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
    rows: np.ndarray, starts: np.ndarray, lengths: np.ndarray, groups: np.ndarray,
    avg_len: float, kq: float, bq: float, buffer: np.ndarray,
    out_rows: np.ndarray, out_scores: np.ndarray, out_counts: np.ndarray,
) -> None:
    """Top ``out_rows.shape[1]`` paragraphs of each query of groups ``groups[g]:groups[g + 1]``.

    ``indptr``/``indices``/``data``: the CSR term-by-paragraph weights over ``n_docs`` paragraphs
    (indices unsigned, so that numba adds no negative-index check to the inner loop). Query q's
    known term rows are ``rows[starts[q]:starts[q + 1]]`` (repeats count) and its length
    ``lengths[q]`` counts every term. ``buffer``: ``n_docs * LANES`` zeros, left zeros. Writes
    query q's hits, best first, to ``out_rows[q]``/``out_scores[q]`` and their number to
    ``out_counts[q]``.
    """
    k = out_rows.shape[1]
    kq1 = np.float32(kq + 1.0)
    heap_scores = np.empty((LANES, k), np.float32)
    heap_rows = np.empty((LANES, k), np.int32)
    weights = np.zeros(LANES, np.float32)
    thresholds = np.zeros(LANES, np.float32)
    filled = np.zeros(LANES, np.int64)
    norms = np.empty(LANES, np.float64)
    for g in range(groups.shape[0] - 1):
        first = groups[g]
        lanes = groups[g + 1] - first
        stride = 1 if lanes == 1 else LANES
        # The group's (row, lane) pairs, sorted: each row's lanes and counts come together.
        keys = np.empty(starts[first + lanes] - starts[first], np.int64)
        at = 0
        for lane in range(lanes):
            q = first + lane
            norms[lane] = kq * ((1.0 - bq) + bq * lengths[q] / avg_len)
            for j in range(starts[q], starts[q + 1]):
                keys[at] = np.int64(rows[j]) * LANES + lane
                at += 1
        keys.sort()
        i = 0
        while i < keys.shape[0]:
            row = keys[i] // LANES
            weights[:] = 0.0
            while i < keys.shape[0] and keys[i] // LANES == row:
                j = i + 1
                while j < keys.shape[0] and keys[j] == keys[i]:
                    j += 1
                lane = keys[i] % LANES
                weights[lane] = _query_weight(j - i, norms[lane], kq1)
                i = j
            postings, values = indices[indptr[row]:indptr[row + 1]], data[indptr[row]:indptr[row + 1]]
            if stride == 1:
                _add_postings(postings, values, weights[0], buffer)
            else:
                _add_postings_lanes(postings, values, (weights[0], weights[1], weights[2], weights[3]), buffer)
        # Scan: every lane's heap, skipping blocks where no score beats the lowest threshold, then
        # clearing the block while it is in cache. (Indexing views from 0 spares numba's
        # negative-index checks, which would keep the comparisons from being vectorised.)
        thresholds[:] = 0.0
        filled[:] = 0
        lowest = np.float32(0.0)
        size = n_docs * stride
        for block in range(0, size, SCAN_WIDTH):
            scores = buffer[block:min(block + SCAN_WIDTH, size)]
            above = np.int32(0)
            for j in range(scores.shape[0]):
                above += np.int32(scores[j] > lowest)
            if above:
                for lane in range(lanes):
                    for j in range(lane, scores.shape[0], stride):
                        if scores[j] > thresholds[lane]:
                            filled[lane] = _offer(heap_scores[lane], heap_rows[lane], filled[lane], scores[j], (block + j) // stride)
                            if filled[lane] == k:
                                thresholds[lane] = heap_scores[lane, 0]
                lowest = thresholds[:lanes].min()
            for j in range(scores.shape[0]):
                scores[j] = 0.0
        # Each heap, emptied worst first into its row's tail: best first.
        for lane in range(lanes):
            q = first + lane
            out_counts[q] = filled[lane]
            for pos in range(filled[lane] - 1, -1, -1):
                out_scores[q, pos] = heap_scores[lane, 0]
                out_rows[q, pos] = heap_rows[lane, 0]
                heap_scores[lane, 0] = heap_scores[lane, pos]
                heap_rows[lane, 0] = heap_rows[lane, pos]
                _sift_down(heap_scores[lane], heap_rows[lane], pos)
