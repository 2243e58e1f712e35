"""Text processing shared by every engine and scorer: tokenizers, the medical query filter, and the
Unicode normalisation and terminal escaping of ``openqa.text.unicode``."""

from __future__ import annotations

from typing import Any

__all__ = ["Tokenizer", "make_tokenizer"]


def __getattr__(name: str) -> Any:
    """The tokenizers, loaded when first asked for: they bring numpy and scipy (bm25s), which the
    command line must not load before it can report a memory limit in one line."""
    if name in __all__:
        from openqa.text import tokenize

        return getattr(tokenize, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
