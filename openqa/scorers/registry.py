"""Option-scoring methods by name: which engine each needs and how its scorer is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from openqa.errors import OpenQAError
from openqa.retrieval.base import Index
from openqa.retrieval.custom_bm25 import QUERY_PRESETS, CustomBM25, QueryParams
from openqa.retrieval.dense import DenseIndex
from openqa.retrieval.elastic import ElasticBM25
from openqa.retrieval.lucene import LuceneBM25
from openqa.retrieval.positional import PositionalIndex
from openqa.scorers.base import OptionScorer
from openqa.scorers.ir import IRScorer, IRSettings
from openqa.scorers.pmi import PMIScorer


def _preset(exam: str) -> QueryParams:
    """The paper's Table B.13 query parameters for ``exam`` (usmle, mcmle or twmle)."""
    if exam not in QUERY_PRESETS:
        raise OpenQAError(f"unknown exam {exam!r}: choose one of {sorted(QUERY_PRESETS)}")
    return QUERY_PRESETS[exam]


def _use_preset(engine: Index, exam: str) -> CustomBM25:
    """Give the custom engine the paper's query parameters for ``exam``."""
    if not isinstance(engine, CustomBM25):
        raise OpenQAError("this method needs the custom engine's index (openqa index --engine custom)")
    engine.query_params = _preset(exam)
    return engine


def _ir_custom(engine: Index, exam: str, settings: IRSettings) -> OptionScorer:
    """IR-Custom: the paper's re-weighted BM25 with its per-exam query parameters."""
    return IRScorer(_use_preset(engine, exam), settings)


def _ir_es(engine: Index, exam: str, settings: IRSettings) -> OptionScorer:
    """IR-ES: the engine's own BM25 (Lucene or Elasticsearch), question + option queries."""
    if not isinstance(engine, (LuceneBM25, ElasticBM25)):
        raise OpenQAError("ir-es needs an off-the-shelf engine: --engine lucene or --engine elasticsearch")
    return IRScorer(engine, settings)


def _paper_query_params(exam: str) -> tuple[dict[str, Any], str]:
    """IR-Custom's fixed query-side parameters for ``exam`` and where they come from."""
    preset = _preset(exam)
    return {"kq": preset.kq, "bq": preset.bq}, f"paper Table B.13 ({exam})"


def _dense(engine: Index, exam: str, settings: IRSettings) -> OptionScorer:
    """Dense: the IR scorer over embedding search (question part + option, top-N aggregate)."""
    if not isinstance(engine, DenseIndex):
        raise OpenQAError("dense needs the dense index: openqa index --engine dense")
    return IRScorer(engine, settings)


def _pmi(index: Index, exam: str, settings: IRSettings) -> OptionScorer:
    """PMI over the positional index (only the settings' query mode applies)."""
    if not isinstance(index, PositionalIndex):
        raise OpenQAError("pmi needs the positional index: openqa index --engine pmi")
    return PMIScorer(index, settings)


@dataclass(frozen=True)
class Method:
    """A scoring method: the engine whose index it reads by default and the factory of its scorer;
    or, for a composite method, the two methods whose option scores it fuses. ``fixed`` gives the
    parameters an exam fixes (not tuned) and their source, for the record of a run."""

    engine: str
    make: Callable[[Index, str, IRSettings], OptionScorer] | None = None
    parts: tuple[str, str] | None = None
    fixed: Callable[[str], tuple[dict[str, Any], str]] | None = None


METHODS: dict[str, Method] = {
    "ir-custom": Method("custom", _ir_custom, fixed=_paper_query_params),
    "ir-es": Method("lucene", _ir_es),
    "pmi": Method("pmi", _pmi),
    "dense": Method("dense", _dense),
    "hybrid": Method("hybrid", parts=("ir-custom", "dense")),
}


def method(name: str) -> Method:
    """The method registered under ``name``, or an error listing the known ones."""
    if name not in METHODS:
        raise OpenQAError(f"unknown method {name!r}: choose one of {sorted(METHODS)} or reader (with --model)")
    return METHODS[name]
