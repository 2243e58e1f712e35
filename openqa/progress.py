"""Progress bars, shown only where asked for: by the commands, or by ``progress=True`` in Python.

Every bar of openqa is a ``tqdm`` made here, disabled unless inside ``shown(True)``: the commands
run inside it, a library call prints nothing unless its caller asks. The switch is a context
variable: it holds for the calling thread (and what runs with its context copied), never for
another caller's thread.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

_SHOWN: ContextVar[bool] = ContextVar("openqa_progress_shown", default=False)


def tqdm(*args: Any, **kwargs: Any) -> Any:
    """``tqdm.tqdm(*args, **kwargs)``, disabled unless inside ``shown(True)``."""
    from tqdm import tqdm as bar

    if not _SHOWN.get():
        kwargs["disable"] = True
    return bar(*args, **kwargs)


@contextmanager
def shown(show: bool) -> Iterator[None]:
    """A block in which progress bars are shown or not (``show``)."""
    token = _SHOWN.set(show)
    try:
        yield
    finally:
        _SHOWN.reset(token)
