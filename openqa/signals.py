"""Holding Ctrl-C and SIGTERM across a few renames that must happen together (a result set taking
its names, an index folder swapped in), so that an interruption lands before or after them; and
counting the calls into native code that a stop must not wait for (``native_call``)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class StoppedAfterWriting(KeyboardInterrupt):
    """A stop (Ctrl-C, SIGTERM) held while files took their names and delivered once all had: the
    command stops, but ``paths`` hold their new content, whole and in place, so what it says must
    not let the user believe the old files are still in force (a tuned pair: the new one is used)."""

    def __init__(self, paths: tuple[Path, ...]) -> None:
        super().__init__(*map(str, paths))
        self.paths = paths


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM inside the block, then deliver them as they would have been (in the
    main thread only: elsewhere signal handlers cannot be changed, and they are never run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


_native_lock = threading.Lock()
_native_calls = 0


@contextmanager
def native_call() -> Iterator[None]:
    """Mark a call into a library's native code that Python cannot interrupt (a prompt in llama.cpp).
    While one runs in another thread, the interpreter's normal exit waits for it inside the library's
    clean-up, or frees memory under it (a crash): the command line then ends the process at once
    instead (``native_calls_running``), its output flushed."""
    global _native_calls
    with _native_lock:
        _native_calls += 1
    try:
        yield
    finally:
        with _native_lock:
            _native_calls -= 1


def native_calls_running() -> int:
    """How many ``native_call`` blocks are running now, in any thread."""
    return _native_calls
