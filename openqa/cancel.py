"""Cooperative cancellation of long work: whoever runs a job (the server, for a request whose time
ran out or whose client left) sets a check for it with ``cancellable``; scorers and engines call
``checkpoint`` between options or batches, where the check raises to stop the work. Outside
``cancellable`` a checkpoint does nothing, so a command-line run pays one context-variable read.

The check travels in a context variable, not an argument, so no scorer's signature changes; a
scorer that hands work to threads of its own checks in the thread that waits for them."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

_check: ContextVar[Callable[[], None] | None] = ContextVar("openqa_cancel_check", default=None)


def checkpoint() -> None:
    """Stop here (the check raises) if the work running in this context was cancelled."""
    check = _check.get()
    if check is not None:
        check()


@contextlib.contextmanager
def cancellable(check: Callable[[], None]) -> Iterator[None]:
    """Run the block with ``check`` called at every ``checkpoint`` (it raises to cancel the work)."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)
