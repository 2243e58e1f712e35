"""openqa: open-domain question answering for medical licensing exams (MedQA).

The Python API (``openqa.api``) is importable from here: ``Searcher``, ``Solver``, ``Workspace``,
``build_index``, ``run_eval``, ``tune`` and the error base ``OpenQAError``. They are loaded on first
use, so ``import openqa`` itself imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openqa.limits import single_blas_thread_under_memory_limit

__version__ = "0.1.0"

single_blas_thread_under_memory_limit()  # before any module of the package imports numpy

#: What ``from openqa import ...`` offers, and the module each comes from.
_EXPORTS = {
    **dict.fromkeys(("Answer", "BatchHits", "Built", "Evaluation", "SearchHit", "Searcher", "Solver", "Tuning",
                     "Workspace", "build_index", "run_eval", "tune"), "openqa.api"),
    **dict.fromkeys(("OpenQAError", "MissingExtraError", "DataError", "UsageError"), "openqa.errors"),
}

if TYPE_CHECKING:
    from openqa.api import (  # noqa: F401
        Answer,
        BatchHits,
        Built,
        Evaluation,
        Searcher,
        SearchHit,
        Solver,
        Tuning,
        Workspace,
        build_index,
        run_eval,
        tune,
    )
    from openqa.errors import DataError, MissingExtraError, OpenQAError, UsageError  # noqa: F401

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    """The API's names, imported when first asked for (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'openqa' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
