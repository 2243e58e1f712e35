"""The read-only results page (``/results``) and its JSON over a folder of eval records.

Every endpoint that reads records runs as its client's job on the server's worker pool
(``Engines.submit``), within ``RESULTS_SECONDS``, and stops at its next cancellation checkpoint (between
prediction rows, records, bootstrap chunks and calibration draws) once its client leaves, its time
runs out or the server stops. Its reply is built and encoded in that job, never on the event loop.
A job is heavy (it shares the heavy workers with long questions, and one client holds at most its
part of them) when it is a comparison, reads a run whose predictions file is over
``HEAVY_BYTES``, or lists the folder for the first time; the others are light. The listing keeps
the headlines it has read (``RunCache``): a later one re-reads only the records changed on disk. A run's
questions and curves are kept encoded (``Replies``): a later read of an unchanged run sends those
bytes as a light job, with no parsing or encoding holding the interpreter lock."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from openqa.errors import OpenQAError, UsageError
from openqa.serve.engines import Engines
from openqa.serve.routes import on_pool
from openqa.serve.schemas import encoded

#: The results page (beside the main page in ``static/``).
PAGE = Path(__file__).parent / "static" / "results.html"


#: The most runs one comparison (``/v1/compare``) reads.
MAX_COMPARED = 8
#: Seconds a results request may take (queueing included): a comparison of 8 runs of 20,000 questions
#: reads and resamples them in a few seconds.
RESULTS_SECONDS = 30.0
#: A run whose predictions file is larger than this is read as a heavy job (about a thousand questions:
#: reading and sending them takes a few tenths of a second).
HEAVY_BYTES = 256 * 1024
#: How many times its size a compressed (shipped) predictions file counts.
COMPRESSION = 8
#: The lane of the results jobs in their client's queues (answers' lanes are languages).
LANE = "results"
#: The most bytes of encoded replies ``Replies`` keeps (a 20,000-question run of US questions with
#: their texts is about 21 MB).
CACHED_BYTES = 128 * 1024 * 1024

#: What a cached reply was read from: each file's path, modification time (ns), size and inode.
Stamp = tuple[tuple[str, int, int, int], ...]


class Replies:
    """The encoded replies of the latest run reads (a run's questions, its curves), each with the
    stamp of the files it was read from (``stamp``): a later read of the same run, its files
    unchanged, is sent as it was encoded; a changed file gives another stamp, and the run is read
    again. Reading and encoding a 20,000-question run holds the interpreter lock for about 0.3 s,
    during which every other request's Python waits. At most ``most_bytes`` are kept, the least
    recently used dropped first."""

    def __init__(self, most_bytes: int = CACHED_BYTES) -> None:
        self.most_bytes = most_bytes
        self._bodies: OrderedDict[tuple[str, str, Stamp], bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def stamp(paths: list[Path]) -> Stamp:
        """The stamp of ``paths`` (taken before they are read: a file changed while it is read has a
        newer one by the next read)."""
        stats = [(str(path), path.stat()) for path in paths]
        return tuple((name, st.st_mtime_ns, st.st_size, st.st_ino) for name, st in stats)

    def get(self, key: tuple[str, str, Stamp]) -> Response | None:
        """The reply kept for ``key`` (what was read, the run as asked, the stamp), or None."""
        with self._lock:
            body = self._bodies.get(key)
            if body is not None:
                self._bodies.move_to_end(key)
        return None if body is None else Response(body, media_type="application/json")

    def put(self, key: tuple[str, str, Stamp], reply: Response) -> Response:
        """Keep ``reply`` for ``key`` (replacing an older stamp of the same run), within ``most_bytes``."""
        body = bytes(reply.body)
        if len(body) <= self.most_bytes:
            with self._lock:
                for old in [k for k in self._bodies if k[:2] == key[:2]]:
                    del self._bodies[old]
                self._bodies[key] = body
                while sum(map(len, self._bodies.values())) > self.most_bytes:
                    self._bodies.popitem(last=False)
        return reply


class Relative:
    """Text sent to clients with the results folder's files named relative to it, never by an
    absolute path (the folder itself is ``<results folder>``)."""

    def __init__(self, folder: Path) -> None:
        self.forms = sorted({str(folder.absolute()), str(folder.resolve())}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self.forms:
            text = text.replace(form + os.sep, "").replace(form, "<results folder>")
        return text

    @contextmanager
    def errors(self) -> Iterator[None]:
        """A one-line error raised inside, its paths relative to the folder."""
        try:
            yield
        except OpenQAError as exc:
            exc.args = (self(str(exc)), *exc.args[1:])
            raise


def run_files(folder: Path, run: str) -> list[Path]:
    """The files a read of the run ``run`` of ``folder`` reads: its predictions, and its record where
    it has one (refused in one line when it has no predictions)."""
    from openqa.evaluate.browse import inside, predictions_file

    files = [predictions_file(folder, run)]
    try:
        files.append(inside(folder, run, ".json"))
    except OpenQAError:
        pass
    return files


def planned(folder: Path, run: str, replies: Replies, what: str) -> tuple[Response | None, tuple[str, str, Stamp] | None, bool]:
    """How to read ``what`` of the run ``run``: its kept reply (or None), the key to keep a new one
    under (None when the run's files cannot be stamped: the read refuses it, a light job), and
    whether the read is a heavy job: no kept reply, and a predictions file over ``HEAVY_BYTES`` (a
    compressed one counted at ``COMPRESSION`` times its size), its size taken from the stamp."""
    try:
        files = run_files(folder, run)
        stamp = Replies.stamp(files)
    except (OpenQAError, OSError):
        return None, None, False
    key = (what, run, stamp)
    kept = replies.get(key)
    _, _, predictions_bytes, _ = stamp[0]  # the predictions file is stamped first
    size = predictions_bytes * (COMPRESSION if files[0].suffix == ".gz" else 1)
    return kept, key, kept is None and size > HEAVY_BYTES


def add_results(app: FastAPI, folder: Path, engines: Engines) -> None:
    """The results page (``/results``) and its JSON: the runs of ``folder``, a run's questions (with
    their text where the data folder has the run's dataset), and the comparison of runs."""
    from openqa.evaluate.browse import (
        MAX_QUESTIONS,
        RunCache,
        inside,
        list_runs,
        resolved_folder,
        run_curves,
        run_questions,
        run_row,
        within,
    )
    from openqa.evaluate.compare import compare_runs, run_paths
    from openqa.pipeline import compare_lookup

    lookup = compare_lookup(engines.ctx.settings)
    shown = folder.name
    folder = Path(folder).absolute()  # every path below it absolute: named relative to it in what clients see
    relative = Relative(folder)
    cache = RunCache()
    replies = Replies()

    async def read_run(run: str, what: str, request: Request, read: Callable[[], Response]) -> Response:
        """``read`` of the run ``run`` as its client's job: its kept reply where the run is unchanged
        since it was read (a light job), else read, encoded and kept."""
        kept, key, heavy = await run_in_threadpool(planned, folder, run, replies, what)

        def work() -> Response:
            if kept is not None:
                return kept
            with relative.errors():
                reply = read()
            return reply if key is None else replies.put(key, reply)

        return await on_pool(engines, request, work, what, RESULTS_SECONDS, LANE, heavy)

    @app.get("/results", include_in_schema=False)
    async def results_page() -> FileResponse:
        return FileResponse(PAGE)

    @app.get("/v1/results", summary="Every eval run of the results folder (unreadable ones with their reason)")
    async def runs(request: Request) -> Response:
        def work() -> Response:
            with relative.errors():
                listing = list_runs(folder, cache)
            return encoded({"folder": shown, "runs": [{**row, "unreadable": relative(row["unreadable"])} if "unreadable" in row
                                                      else row for row in listing]})

        return await on_pool(engines, request, work, "the results listing", RESULTS_SECONDS, LANE,
                             heavy=not cache.has_listed(folder))

    # before the questions' route: a run named with its folder holds slashes, and that route takes any path
    @app.get("/v1/results/{run:path}/curves", summary="A run's risk-coverage curve and reliability diagram, from its predictions "
                                                 "(RUN: its name, or its folder and name: runs/us/NAME)")
    async def run_curve(run: str, request: Request) -> Response:
        return await read_run(run, "a run's curves", request, lambda: encoded(run_curves(folder, run)))

    @app.get("/v1/results/{run:path}", summary=f"A run's first {MAX_QUESTIONS:,} questions (cut: whether it has more): prediction, "
                                                "answer, probabilities, and the question's text where known (RUN: its name, or "
                                                "its folder and name: runs/us/NAME)")
    async def questions(run: str, request: Request) -> Response:
        def read() -> Response:
            rows = run_questions(folder, run, MAX_QUESTIONS + 1)  # the name is checked there: a plain file of the folder or its subfolders
            cut = len(rows) > MAX_QUESTIONS
            del rows[MAX_QUESTIONS:]
            try:
                summary: Path | None = inside(folder, run, ".json")
            except OpenQAError:
                summary = None
            # that run's record alone, not the whole folder's
            record = run_row(summary, resolved_folder(folder)) if summary is not None else None
            texts = engines.question_texts(record["dataset"], record["split"]) if record and "dataset" in record else {}
            return encoded({"run": run, "questions": [{**row, **texts.get(str(row["qid"]), {})} for row in rows], "cut": cut,
                            "most": MAX_QUESTIONS})

        return await read_run(run, "a run's questions", request, read)

    @app.get("/v1/compare", summary=f"Runs compared question by question (as openqa compare): ?runs=A,B[,C...], at most {MAX_COMPARED}")
    async def compare(runs: str, request: Request) -> Response:
        names = runs.split(",")
        if len(names) > MAX_COMPARED:
            raise UsageError(f"compare at most {MAX_COMPARED} runs at once, not {len(names)}")

        def work() -> Response:
            with relative.errors():
                paths = [inside(folder, name, ".json") for name in names]
                top = folder.resolve()
                for path in paths:
                    predictions = run_paths(path)[1]
                    if predictions.is_symlink() and not within(top, predictions):  # a link out of the folder is never followed
                        raise UsageError(f"no run named {path.name!r} here")
                return encoded(compare_runs(paths, lookup))  # which refuses a run given twice

        return await on_pool(engines, request, work, "the comparison", RESULTS_SECONDS, LANE, heavy=True)
