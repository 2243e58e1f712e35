"""What openqa adapts to a memory limit before any numerical library loads.

Under an address-space limit (``ulimit -v``), OpenBLAS (numpy's and scipy's) starts its worker
threads but cannot give them their buffers, and a matrix product then spins forever in C, deaf
to Ctrl-C and SIGTERM (``openqa eval`` under ``ulimit -v 400000``). With one thread the same
shortage is an ordinary ``MemoryError``, which the command line reports in one line. So when such
a limit is set, OpenBLAS gets one thread unless the user chose a number; without a limit nothing
changes."""

from __future__ import annotations

import os
import resource


def single_blas_thread_under_memory_limit() -> None:
    """Set ``OPENBLAS_NUM_THREADS=1`` (unless set) when the address space is limited; it must run
    before numpy is first imported, which reads it once."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
