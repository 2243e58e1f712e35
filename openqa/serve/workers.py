"""Worker threads shared fairly among the server's requests.

Jobs wait in one queue per lane (a method in a language, and whether the request is heavy); a
free worker takes the next job of the lanes in turn, so a lane that many requests queue in gets
one turn like any other. Heavy jobs (large questions or top-N, see ``Engines``) hold at most
``heavy_share`` workers together, so the others only ever run short jobs: a short request finds a
worker within one short job's time, whatever long ones are queued or running. (Capping each lane
at all workers but one as well cost a single busy lane a quarter of its throughput here: 145
against 198 requests/s, p95 264 against 154 ms, medians of three alternated runs of
``scripts/bench_serve.py``.) A job whose future was
cancelled (its client left) is dropped from its queue unstarted.

The threads are daemons: a job still running when the server stops (it reaches its next
cancellation checkpoint soon after) never holds the process open.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Hashable


@dataclass
class _Job:
    heavy: bool
    run: Callable[[], Any]
    future: Future[Any]


class FairPool:
    """``threads`` daemon workers serving per-lane queues in turn (see the module's docstring)."""

    def __init__(self, threads: int, name: str, heavy_share: int) -> None:
        self.threads = threads
        self.heavy_share = max(1, min(heavy_share, threads))
        self._queues: OrderedDict[Hashable, deque[_Job]] = OrderedDict()
        self._heavy = 0
        self._stopped = False
        self._changed = threading.Condition()
        self._workers = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, lane: Hashable, heavy: bool, run: Callable[[], Any]) -> Future[Any]:
        """Queue ``run`` in ``lane``; its future holds what it returns or raises."""
        future: Future[Any] = Future()
        with self._changed:
            if self._stopped:
                raise RuntimeError("the pool is stopped")
            self._queues.setdefault(lane, deque()).append(_Job(heavy, run, future))
            self._changed.notify()
        return future

    def _take(self) -> _Job | None:
        """The next job that may start (lanes in turn; called with the lock held), or None."""
        for lane in list(self._queues):
            queue = self._queues[lane]
            while queue and queue[0].future.cancelled():
                queue.popleft()
            if not queue:
                del self._queues[lane]
                continue
            if queue[0].heavy and self._heavy >= self.heavy_share:
                continue
            job = queue.popleft()
            self._queues.move_to_end(lane)  # its next job waits for the other lanes' turns
            if not queue:
                del self._queues[lane]
            return job
        return None

    def _serve(self) -> None:
        while True:
            with self._changed:
                job = self._take()
                while job is None:
                    if self._stopped:
                        return
                    self._changed.wait()
                    job = self._take()
                self._heavy += job.heavy
            try:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(job.run())
                    except BaseException as exc:  # the job's own error goes to whoever waits for it
                        job.future.set_exception(exc)
            finally:
                with self._changed:
                    self._heavy -= job.heavy
                    self._changed.notify_all()

    def shutdown(self, wait_s: float = 0.0) -> None:
        """Cancel the queued jobs, let the workers end, and wait up to ``wait_s`` seconds for the
        running jobs (they stop at their next cancellation checkpoint once told to)."""
        with self._changed:
            self._stopped = True
            for queue in self._queues.values():
                for job in queue:
                    job.future.cancel()
            self._queues.clear()
            self._changed.notify_all()
        deadline = time.monotonic() + wait_s
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
