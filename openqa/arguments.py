"""Checks of the arguments a caller of the Python API gives, each refusing an impossible one with a
one-line ``UsageError`` that names it, as the command line's parser and the server's request models
refuse theirs: the API raises ``OpenQAError`` and nothing else, whatever it is handed.

Each check returns the value it accepted (a path as a ``Path``), so a caller writes
``k = whole("k", k, 1, MAX_K)`` once, where the argument comes in.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from pathlib import Path
from typing import Any, Iterable

from openqa.errors import UsageError


def _kind(value: Any) -> str:
    """How an error names the type of a value it refuses."""
    return "None" if value is None else type(value).__name__


def shown(value: Any, limit: int = 200) -> str:
    """A value as a one-line error shows it: its ``repr`` (a text's or an exception's ``str``) on one
    line, cut to about ``limit`` characters (a 2-D array's or a long text's repr would fill the screen)."""
    text = str(value) if isinstance(value, BaseException) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def named(path: Any) -> str:
    """A path as a one-line message names it: as it is, or (holding a line break or another control
    character) as its repr, so that the message stays one line."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
    return text if isinstance(text, str) and text.isprintable() else shown(text, 200)


def encodable(value: str) -> bool:
    """Whether ``value`` can be written as UTF-8 (a lone surrogate cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        raise UsageError(f"{name} must be a whole number, not {_kind(value)} {shown(value)}")
    if value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise UsageError(f"{name} must be {span}, not {value}")
    return value


def optional_whole(name: str, value: Any, low: int, high: int | None = None) -> int | None:
    """None or a whole number from ``low`` to ``high``."""
    return None if value is None else whole(name, value, low, high)


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (an int or a float, numpy's too; not a bool)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def number(name: str, value: Any, low: float, high: float = math.inf, *, above: bool = False) -> float:
    """A finite number from ``low`` (or above it, with ``above``) to ``high``, as a float."""
    if not is_number(value) or value < low or (above and value == low) or value > high:
        span = f"above {low}" if above else f"at least {low}"
        span += f" and at most {high}" if high < math.inf else ""
        raise UsageError(f"{name} must be a number {span}, not {_kind(value)} {shown(value)}")
    return float(value)


def probability(name: str, value: Any) -> float | None:
    """None or a number from 0 to 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= 1):
        raise UsageError(f"{name} must be a probability from 0 to 1, not {shown(value)}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """True or False."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be True or False, not {_kind(value)} {shown(value)}")
    return value


def one_of(name: str, value: Any, choices: Iterable[str]) -> str:
    """One of ``choices``."""
    known = list(choices)
    if not isinstance(value, str) or value not in known:
        raise UsageError(f"unknown {name} {shown(value)}: choose one of {', '.join(known)}")
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
        raise UsageError(f"{name} must name a path, not {shown(given)}")
    return Path(checked_path(name, given))


#: The longest name of one file or folder, in bytes, that file systems keep (ext4, XFS, btrfs, tmpfs: 255).
NAME_MAX = 255


def checked_path(name: str, given: str) -> str:
    """``given`` if the file system can name it: UTF-8 text (no lone surrogate, no NUL) whose every
    component is at most ``NAME_MAX`` bytes; else a one-line error (the file system's own is an
    ``OSError`` with the whole path in it). Whatever takes a path from a caller or the environment
    passes it through here (``path``, ``openqa.config``)."""
    if not encodable(given) or "\0" in given:
        raise UsageError(f"{name} must be a path of UTF-8 text, not {shown(given)}")
    longest = max((part for part in given.split(os.sep)), key=lambda part: len(part.encode()))
    if len(longest.encode()) > NAME_MAX:
        raise UsageError(f"{name}: the name {shown(longest, 40)} is {len(longest.encode())} bytes long; "
                         f"file systems keep names of at most {NAME_MAX}")
    return given


def texts(name: str, value: Any) -> list[str]:
    """A list (or tuple) of strings; one string alone is refused (it would be read letter by letter)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise UsageError(f"{name} must be a list of texts, not {_kind(value)}")
    for number, item in enumerate(value, start=1):
        if not isinstance(item, str):
            raise UsageError(f"{name}: item {number} must be text, not {_kind(item)}")
    return list(value)


def device(name: str, value: Any, present: bool = True) -> str | None:
    """None or a device torch computes on (``cpu``, ``cuda``, ``cuda:N``, ``mps``) that this machine has
    (unless ``present`` is False: a caller that reaches the device later checks it then): a GPU asked
    for where torch sees none is refused here, in one line, not by torch in many. Callers use torch
    already (it is imported here, never at ``import openqa``)."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"cpu|cuda(:[0-9]{1,2})?|mps", value):
        raise UsageError(f"{name} must be cpu, cuda, cuda:N or mps, not {_kind(value)} {shown(value)}")
    if not present:
        return value
    import torch

    if value.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(value.partition(":")[2] or 0) >= count:
            raise UsageError(f"{name} {value}: torch sees {count} GPU{'' if count == 1 else 's'} here")
    elif value == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"{name} mps: torch has no Apple GPU here")
    return value
