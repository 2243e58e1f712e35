"""How a command stops: SIGTERM as Ctrl-C, and a Ctrl-C that a finalizer swallowed raised again
in the code it interrupted."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ProfileFunction


class _Terminated(KeyboardInterrupt):
    """SIGTERM: stops like Ctrl-C, but is never taken as "drop this question" (``openqa.terminal``)."""


def _interrupt(signum: int, frame: object) -> None:
    raise _Terminated


#: An interruption a finalizer swallowed, waiting to be raised in the code it interrupted, and the
#: profile function to put back then.
_swallowed: tuple[KeyboardInterrupt, ProfileFunction | None] | None = None


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a Ctrl-C (or SIGTERM) whose handler ran inside a finalizer (numba's
    llvmlite objects are deleted while a kernel loads, tqdm's bars while they close) would be printed
    as "Exception ignored in ..." and lost, and the command would run to its end. It is raised
    instead at the next call or return of the interrupted code (a one-shot profile function, which
    lets a finalizer it lands in swallow it and come back here); anything else is reported as usual."""
    global _swallowed
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
        if _swallowed is None:
            _swallowed = exc, sys.getprofile()
        sys.setprofile(_raise_swallowed)
    else:
        sys.__unraisablehook__(unraisable)


def _raise_swallowed(frame: FrameType, event: str, arg: object) -> None:
    """The one-shot profile function of ``_unraisable``: the swallowed interruption, raised afresh."""
    global _swallowed
    if frame.f_code is _unraisable.__code__ or _swallowed is None:
        return
    (exc, previous), _swallowed = _swallowed, None
    sys.setprofile(previous)
    raise type(exc)()


def install_interrupts() -> None:
    """SIGTERM stops like Ctrl-C; a swallowed Ctrl-C is raised again (``_unraisable``)."""
    signal.signal(signal.SIGTERM, _interrupt)
    sys.unraisablehook = _unraisable
