"""Worker threads shared fairly among the server's requests.

Jobs wait in one queue per lane (a method in a language, and whether the request is heavy); a
free worker takes the next job of the lanes in turn, so a lane that many requests queue in gets
one turn like any other. No lane holds more than all workers but one, and heavy jobs (large
questions or top-N, see ``Engines``) hold at most ``heavy_share`` workers together: a short
request always finds a worker within one short job's time, whatever long ones are queued or
running. A job whose future was cancelled (its client left) is dropped from its queue unstarted.

The threads are daemons: a job still running when the server stops (it reaches its next
cancellation checkpoint soon after) never holds the process open.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Hashable


@dataclass
class _Job:
    lane: Hashable
    heavy: bool
    run: Callable[[], Any]
    future: Future[Any]


class FairPool:
    """``threads`` daemon workers serving per-lane queues in turn (see the module's docstring)."""

    def __init__(self, threads: int, name: str, heavy_share: int) -> None:
        self.threads = threads
        self.lane_share = max(1, threads - 1)
        self.heavy_share = max(1, min(heavy_share, self.lane_share))
        self._queues: OrderedDict[Hashable, deque[_Job]] = OrderedDict()
        self._running: Counter[Hashable] = Counter()
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
            self._queues.setdefault(lane, deque()).append(_Job(lane, heavy, run, future))
            self._changed.notify()
        return future

    def queued(self) -> int:
        """Jobs waiting for a worker (cancelled ones included until a worker drops them)."""
        with self._changed:
            return sum(map(len, self._queues.values()))

    def _take(self) -> _Job | None:
        """The next job that may start (lanes in turn; called with the lock held), or None."""
        for lane in list(self._queues):
            queue = self._queues[lane]
            while queue and queue[0].future.cancelled():
                queue.popleft()
            if not queue:
                del self._queues[lane]
                continue
            if self._running[lane] >= self.lane_share or (queue[0].heavy and self._heavy >= self.heavy_share):
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
                self._running[job.lane] += 1
                self._heavy += job.heavy
            try:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(job.run())
                    except BaseException as exc:  # the job's own error goes to whoever waits for it
                        job.future.set_exception(exc)
            finally:
                with self._changed:
                    self._running[job.lane] -= 1
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
