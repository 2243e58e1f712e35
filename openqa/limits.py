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

#: The least address space (MiB) openqa starts in: below it, loading numpy, scipy and numba fails in
#: ways no program can report (scipy's OpenBLAS loops forever at 350 MB, a C++ ``bad_alloc`` aborts
#: at 550 MB); an evaluation of the English textbooks ran at 635 MiB (peak resident 303 MB).
MIN_ADDRESS_SPACE_MB = 640


def address_space_shortfall() -> int | None:
    """The address-space limit in MiB when it is below ``MIN_ADDRESS_SPACE_MB``, else None."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY or soft >= MIN_ADDRESS_SPACE_MB << 20:
        return None
    return soft >> 20


def address_space_limited() -> bool:
    """Whether this process runs under an address-space limit (``ulimit -v``)."""
    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY


def single_blas_thread_under_memory_limit() -> None:
    """Set ``OPENBLAS_NUM_THREADS=1`` (unless set) when the address space is limited; it must run
    before numpy is first imported, which reads it once."""
    if address_space_limited():
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
