"""Hybrid retrieval: one engine's ranking fused with another's (IR-Custom with dense).

Two fusions: reciprocal-rank fusion, sum of 1 / (60 + rank), and a weighted sum of min-max
normalised scores, ``weight * first + (1 - weight) * second`` (a paragraph missing from one
list counts 0 there). Each part is searched ``DEPTH`` deep; its hits are cached per query, so
tuning the fusion on dev searches each engine once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from openqa.errors import IndexMismatchError, OpenQAError, UsageError
from openqa.retrieval.base import Hit, SearchEngine

RRF_K = 60
DEPTH = 100
FUSIONS = ("rrf", "weighted")


@dataclass(frozen=True)
class Fusion:
    """How two rankings become one: ``rrf`` or ``weighted`` (``weight`` on the first engine)."""

    kind: str = "rrf"
    weight: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in FUSIONS:
            raise UsageError(f"unknown fusion {self.kind!r}: choose one of {FUSIONS}")
        if not 0.0 <= self.weight <= 1.0:
            raise OpenQAError(f"fusion weight must be between 0 and 1, not {self.weight}")


def rrf(first: list[Hit], second: list[Hit]) -> dict[int, float]:
    """Reciprocal-rank fusion scores (ranks from 1)."""
    fused: dict[int, float] = {}
    for hits in (first, second):
        for rank, hit in enumerate(hits, start=1):
            fused[hit.index] = fused.get(hit.index, 0.0) + 1.0 / (RRF_K + rank)
    return fused


def _minmax(hits: list[Hit]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    low, high = min(scores), max(scores)
    span = high - low
    return {h.index: (h.score - low) / span if span > 0 else 1.0 for h in hits}


def weighted(first: list[Hit], second: list[Hit], weight: float) -> dict[int, float]:
    """``weight`` x normalised first score + (1 - ``weight``) x normalised second score."""
    a, b = _minmax(first), _minmax(second)
    return {i: weight * a.get(i, 0.0) + (1 - weight) * b.get(i, 0.0) for i in a.keys() | b.keys()}


def fuse(first: list[Hit], second: list[Hit], fusion: Fusion, k: int) -> list[Hit]:
    """The top ``k`` of the fused ranking (ties: lower paragraph row first)."""
    scores = rrf(first, second) if fusion.kind == "rrf" else weighted(first, second, fusion.weight)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [Hit(i, s) for i, s in ranked]


class FusedEngine(SearchEngine):
    """Two engines over the same paragraphs, searched together and fused (each part ``DEPTH`` deep;
    query-side parameters go to the first part, IR-Custom)."""

    name = "hybrid"
    summary = "custom and dense searched together (not built: build both parts)"

    def __init__(self, first: SearchEngine, second: SearchEngine, fusion: Fusion = Fusion()) -> None:
        for key in ("corpus_checksum", "paragraphs"):
            if first.manifest.get(key) != second.manifest.get(key):
                raise IndexMismatchError(
                    f"cannot fuse {first.name} and {second.name}: their indexes differ in {key}; rebuild both"
                )
        self.first, self.second = first, second
        self.fusion = fusion
        self.tokenizer = first.tokenizer
        self.paragraphs = first.paragraphs
        self.manifest = {**first.manifest, "engine": self.name, "parts": [first.manifest, second.manifest]}

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> None:
        raise OpenQAError("the hybrid engine has no index of its own: build --engine custom and --engine dense")

    @classmethod
    def open(cls, *args: Any, **kwargs: Any) -> "FusedEngine":
        raise OpenQAError("the hybrid engine has no index of its own: open its parts (custom and dense)")

    def search(
        self, queries: Sequence[str], k: int, params: Any = None, progress: Callable[[int], None] | None = None,
        threads: int | None = None,
    ) -> list[list[Hit]]:
        """Each distinct query searched once in each part, then fused."""
        distinct = list(dict.fromkeys(queries))
        first = dict(zip(distinct, self.first.search(distinct, DEPTH, params)))
        second = dict(zip(distinct, self.second.search(distinct, DEPTH, progress=progress)))
        return [fuse(first[q], second[q], self.fusion, k) for q in queries]

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return self.search(queries, k)
