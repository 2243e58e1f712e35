"""Holding Ctrl-C and SIGTERM across a few renames that must happen together (a result set taking
its names, an index folder swapped in), so that an interruption lands before or after them."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


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
