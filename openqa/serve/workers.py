"""Worker threads shared fairly among the server's requests and their clients.

Jobs wait in one queue per client, lane and weight: the client is whose work it is (the server
gives the peer address), the lane a kind of work of that client (the server's are languages), the
weight whether the job is heavy. A free worker takes the next job of the queues in turn, so a
queue that many requests wait in gets one turn like any other. Heavy jobs (large
questions, top-N or queries, see ``Engines``) hold at most ``heavy_share`` workers together, so the
others only ever run short jobs: a short request finds a worker within one short job's time,
whatever long ones are queued or running. One client's heavy jobs hold at most ``heavy_share - 1``
of those (one, when the share is two): a client looping heavy questions leaves a heavy worker
free, so another client's heavy request starts at once instead of waiting seconds for a long job
to end, and its own heavy requests in one language take turns with those in another.
(Capping each queue's short jobs as well cost a single busy queue a quarter of its throughput here:
145 against 198 requests/s, p95 264 against 154 ms, medians of three alternated runs of
``scripts/benchmarks/bench_serve.py``.) A job whose future was cancelled (its client left) is dropped from
its queue unstarted. A ``JobCap`` shared by pools keeps one client's jobs in flight (queued or
running, in any of them) under a cap: a client past it is refused at once (``TooManyJobs``) instead
of growing its queues without bound.

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


class TooManyJobs(Exception):
    """A client has as many jobs in flight as its cap allows (the message names the cap)."""


class JobCap:
    """At most ``cap`` jobs of one client in flight (queued or running) in the pools sharing it; a
    job counts until it ends, or until it is cancelled while queued."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._jobs: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def take(self, client: Hashable, future: Future[Any]) -> None:
        """Count ``future`` as ``client``'s until it is done, or raise ``TooManyJobs`` at the cap."""
        with self._lock:
            if self._jobs[client] >= self.cap:
                raise TooManyJobs(f"too many requests in flight from this client: at most {self.cap} at once "
                                  "(queued or running); wait for an answer before sending more")
            self._jobs[client] += 1
        future.add_done_callback(lambda _: self._release(client))

    def _release(self, client: Hashable) -> None:
        with self._lock:
            self._jobs -= Counter({client: 1})  # drops the clients with none in flight

    def in_flight(self, client: Hashable) -> int:
        """How many jobs of ``client`` are in flight."""
        with self._lock:
            return self._jobs[client]


@dataclass
class _Job:
    client: Hashable
    heavy: bool
    run: Callable[[], Any]
    future: Future[Any]


class FairPool:
    """``threads`` daemon workers serving per-client and per-lane queues in turn (see the module's docstring)."""

    def __init__(self, threads: int, name: str, heavy_share: int, cap: JobCap | None = None) -> None:
        self.threads = threads
        self.cap = cap
        self.heavy_share = max(1, min(heavy_share, threads))
        #: How many heavy jobs one client may run together: all but one of the heavy share (at least one).
        self.client_share = max(1, self.heavy_share - 1)
        self._queues: OrderedDict[tuple[Hashable, Hashable, bool], deque[_Job]] = OrderedDict()
        self._heavy: Counter[Hashable] = Counter()  # running heavy jobs per client
        self._stopped = False
        self._changed = threading.Condition()
        self._workers = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, client: Hashable, lane: Hashable, heavy: bool, run: Callable[[], Any]) -> Future[Any]:
        """Queue ``run`` as ``client``'s work in ``lane`` (jobs of one client, lane and weight start in
        order; their queues take turns); its future holds what it returns or raises. ``TooManyJobs``
        when the client is at the pool's ``cap``."""
        future: Future[Any] = Future()
        with self._changed:
            if self._stopped:
                raise RuntimeError("the pool is stopped")
            if self.cap is not None:
                self.cap.take(client, future)
            self._queues.setdefault((client, lane, heavy), deque()).append(_Job(client, heavy, run, future))
            self._changed.notify()
        return future

    def _may_start(self, job: _Job) -> bool:
        """Whether ``job`` may start now: a short one always, a heavy one within the heavy share and
        its client's part of it (called with the lock held)."""
        return not job.heavy or (self._heavy.total() < self.heavy_share and self._heavy[job.client] < self.client_share)

    def _take(self) -> _Job | None:
        """The next job that may start (queues in turn; called with the lock held), or None."""
        for key in list(self._queues):
            queue = self._queues[key]
            while queue and queue[0].future.cancelled():
                queue.popleft()
            if not queue:
                del self._queues[key]
                continue
            if not self._may_start(queue[0]):
                continue
            job = queue.popleft()
            self._queues.move_to_end(key)  # its next job waits for the other queues' turns
            if not queue:
                del self._queues[key]
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
                self._heavy[job.client] += job.heavy
            try:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(job.run())
                    except BaseException as exc:  # the job's own error goes to whoever waits for it
                        job.future.set_exception(exc)
            finally:
                with self._changed:
                    self._heavy -= Counter({job.client: job.heavy})  # drops the clients that run no heavy job
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
