"""Checks of the arguments a caller of the Python API gives, each refusing an impossible one with a
one-line ``UsageError`` that names it, as the command line's parser and the server's request models
refuse theirs: the API raises ``OpenQAError`` and nothing else, whatever it is handed.

Each check returns the value it accepted (a path as a ``Path``), so a caller writes
``k = whole("k", k, 1, MAX_K)`` once, where the argument comes in.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable

from openqa.errors import UsageError


def _kind(value: Any) -> str:
    """How an error names the type of a value it refuses."""
    return "None" if value is None else type(value).__name__


def text(name: str, value: Any) -> str:
    """A string (any, even empty: what it must hold is the caller's to say)."""
    if not isinstance(value, str):
        raise UsageError(f"{name} must be text, not {_kind(value)}")
    return value


def optional_text(name: str, value: Any) -> str | None:
    """None or a string."""
    return None if value is None else text(name, value)


def whole(name: str, value: Any, low: int, high: int | None = None) -> int:
    """A whole number from ``low`` to ``high`` (a bool or a float is refused, as the command line's
    ``type=int`` refuses ``2.5``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number, not {_kind(value)} {value!r}")
    if value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise UsageError(f"{name} must be {span}, not {value}")
    return value


def optional_whole(name: str, value: Any, low: int, high: int | None = None) -> int | None:
    """None or a whole number from ``low`` to ``high``."""
    return None if value is None else whole(name, value, low, high)


def probability(name: str, value: Any) -> float | None:
    """None or a number from 0 to 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= 1):
        raise UsageError(f"{name} must be a probability from 0 to 1, not {value!r}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """True or False."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be True or False, not {_kind(value)} {value!r}")
    return value


def one_of(name: str, value: Any, choices: Iterable[str]) -> str:
    """One of ``choices``."""
    known = list(choices)
    if not isinstance(value, str) or value not in known:
        raise UsageError(f"unknown {name} {value!r}: choose one of {', '.join(known)}")
    return value


def optional_one_of(name: str, value: Any, choices: Iterable[str]) -> str | None:
    """None or one of ``choices``."""
    return None if value is None else one_of(name, value, choices)


def path(name: str, value: Any) -> Path | None:
    """None, or a file-system path given as text or a path object (not empty, no NUL)."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{name} must be a path (text or a Path), not {_kind(value)}")
    given = os.fspath(value)
    if not isinstance(given, str) or not given.strip() or "\0" in given:
        raise UsageError(f"{name} must name a path, not {given!r}")
    return Path(given)


def texts(name: str, value: Any) -> list[str]:
    """A list (or tuple) of strings; one string alone is refused (it would be read letter by letter)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise UsageError(f"{name} must be a list of texts, not {_kind(value)}")
    for number, item in enumerate(value, start=1):
        if not isinstance(item, str):
            raise UsageError(f"{name}: item {number} must be text, not {_kind(item)}")
    return list(value)
