"""The stop-word lists openqa uses: NLTK's English list and a Chinese list, as the ``bm25s`` package
ships them (``bm25s/stopwords.py``, plain tuples of words).

The file is read on its own: importing ``bm25s.stopwords`` would first run the ``bm25s`` package,
which imports numba, scipy and tqdm (1.4 s), for two lists of words.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from types import ModuleType

from openqa.errors import OpenQAError


@lru_cache(maxsize=1)
def _lists() -> ModuleType:
    """``bm25s/stopwords.py`` executed as a module of its own (it imports nothing)."""
    package = importlib.util.find_spec("bm25s")
    locations = list(package.submodule_search_locations or []) if package else []
    spec = importlib.util.spec_from_file_location("openqa.text._bm25s_stopwords", f"{locations[0]}/stopwords.py") if locations else None
    if spec is None or spec.loader is None:
        raise OpenQAError("the bm25s package (its stop-word lists) is missing: reinstall openqa-medqa")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def english() -> frozenset[str]:
    """NLTK's English stop words plus bm25s' additions (``STOPWORDS_EN_PLUS``)."""
    return frozenset(_lists().STOPWORDS_EN_PLUS)


def chinese() -> frozenset[str]:
    """bm25s' Chinese stop words (``STOPWORDS_CHINESE``)."""
    return frozenset(_lists().STOPWORDS_CHINESE)
