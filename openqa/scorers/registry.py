"""Option-scoring methods by name: which engine each needs and how its scorer is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from openqa.errors import OpenQAError
from openqa.retrieval.base import Index, SearchEngine
from openqa.retrieval.custom_bm25 import QUERY_PRESETS, CustomBM25
from openqa.retrieval.positional import PositionalIndex
from openqa.scorers.base import OptionScorer
from openqa.scorers.ir import IRScorer, IRSettings
from openqa.scorers.pmi import PMIScorer


def _ir_custom(engine: SearchEngine, exam: str, settings: IRSettings) -> OptionScorer:
    """IR-Custom with the paper's query parameters for ``exam`` (usmle, mcmle or twmle)."""
    if not isinstance(engine, CustomBM25):
        raise OpenQAError("ir-custom needs the custom engine's index (openqa index --engine custom)")
    if exam not in QUERY_PRESETS:
        raise OpenQAError(f"unknown exam {exam!r}: choose one of {sorted(QUERY_PRESETS)}")
    engine.query_params = QUERY_PRESETS[exam]
    return IRScorer(engine, settings)


def _ir_es(engine: SearchEngine, exam: str, settings: IRSettings) -> OptionScorer:
    """IR-ES: the engine's own BM25 (Lucene or Elasticsearch), question + option queries."""
    if isinstance(engine, CustomBM25):
        raise OpenQAError("ir-es needs an off-the-shelf engine: --engine lucene or --engine elasticsearch")
    return IRScorer(engine, settings)


def _pmi(index: Index, exam: str, settings: IRSettings) -> OptionScorer:
    """PMI over the positional index (only the settings' query mode applies)."""
    if not isinstance(index, PositionalIndex):
        raise OpenQAError("pmi needs the positional index: openqa index --engine pmi")
    return PMIScorer(index, settings)


@dataclass(frozen=True)
class Method:
    """A scoring method: the engine whose index it reads by default and the factory of its scorer."""

    engine: str
    make: Callable[[Index, str, IRSettings], OptionScorer]


METHODS: dict[str, Method] = {
    "ir-custom": Method("custom", _ir_custom),
    "ir-es": Method("lucene", _ir_es),
    "pmi": Method("pmi", _pmi),
}


def method(name: str) -> Method:
    """The method registered under ``name``, or an error listing the known ones."""
    if name not in METHODS:
        raise OpenQAError(f"unknown method {name!r}: choose one of {sorted(METHODS)}")
    return METHODS[name]
