"""Running one hostile case and judging how it ended; the figures every case and interruption adds to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

OPENQA = str(Path(sys.executable).with_name("openqa"))
#: A command that has not ended after this many seconds hangs; after a SIGINT it has this long to stop.
HANG_SECONDS, STOP_SECONDS = 120, 20
#: Figures that count bad outcomes (the target of each is 0).
BAD = ("tracebacks", "crashes", "hangs", "wrong_exits", "indexes_lost", "indexes_half_written", "scratch_left", "crash_logs",
       "result_sets_inconsistent", "temporaries_left")


def default_sigint() -> None:
    """``preexec_fn`` of every command run: SIGINT at its default, as at a person's terminal, even
    when the suite itself was started in the background (which ignores SIGINT, and so would its children)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Case:
    """One hostile run: the arguments, its standard input, and whether an answer or an error is right."""

    name: str
    category: str
    argv: list[str]
    stdin: bytes | None = None
    expect: str = "error"  # or "ok", or "either" (a right answer or a clean error)
    check: Callable[[str, str], bool] | None = None  # on stdout and stderr; must hold for either expectation
    env: dict[str, str] = field(default_factory=dict)  # added to the environment
    memory_kb: int | None = None  # an address-space limit (ulimit -v)
    stdin_closed: bool = False
    stdin_file: str | None = None  # read standard input from this file (/dev/zero) instead of ``stdin``
    setup: Callable[[], None] | None = None  # called just before the run (another process takes a lock)
    program: list[str] | None = None  # the command run (default: the openqa console script), the case's arguments after it
    marker: str = "error"  # what the one line of a clean error holds ("get_model:" for that script)
    stdout_file: Path | None = None  # standard output appended to this file (as ``>> FILE``) instead of a pipe


@dataclass
class Outcome:
    name: str
    category: str
    verdict: str  # clean-error, ok, traceback, crash (killed by a signal: SIGSEGV, SIGABRT), hang, wrong-exit
    seconds: float
    detail: str = ""


@dataclass
class Figures:
    """What bench-faults.json reports."""

    cases: int = 0
    clean_errors: int = 0
    answered: int = 0
    tracebacks: int = 0
    crashes: int = 0
    hangs: int = 0
    wrong_exits: int = 0
    interruptions: int = 0
    clean_stops: int = 0
    indexes_lost: int = 0
    indexes_half_written: int = 0
    scratch_left: int = 0
    crash_logs: int = 0
    result_sets_inconsistent: int = 0
    temporaries_left: int = 0
    tuned_pairs_refused: int = 0  # mismatched weights and calibration a SIGKILL left, refused by eval in one line
    failures: list[dict[str, Any]] = field(default_factory=list)

    def stopped(self, name: str, verdict: str, detail: str) -> None:
        """Count one interrupted run by how it ended."""
        self.interruptions += 1
        if verdict in ("clean-stop", "killed", "finished"):
            self.clean_stops += 1
            return
        self.failed(verdict, {"name": name, "verdict": verdict, "detail": detail})

    def answered_case(self, outcome: Outcome) -> None:
        """Count one hostile case by how it ended."""
        self.cases += 1
        if outcome.verdict in ("clean-error", "ok"):
            self.clean_errors += outcome.verdict == "clean-error"
            self.answered += outcome.verdict == "ok"
            return
        self.failed(outcome.verdict, asdict(outcome))

    def failed(self, verdict: str, failure: dict[str, Any]) -> None:
        """Count a run that ended badly (a traceback, a hang, a wrong exit) and keep its details."""
        self.tracebacks += verdict == "traceback"
        self.crashes += verdict == "crash"
        self.hangs += verdict == "hang"
        self.wrong_exits += verdict == "wrong-exit"
        self.failures.append(failure)

    def bad(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in BAD}


def judge(case: Case, rc: int | None, out: str, err: str, seconds: float) -> Outcome:
    """Classify a finished (or hung: ``rc`` None) run of ``case``."""
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", "  "))]
    if rc is None:
        return Outcome(case.name, case.category, "hang", seconds)
    if "Traceback" in err:
        return Outcome(case.name, case.category, "traceback", seconds, err[-400:])
    if rc < 0:
        return Outcome(case.name, case.category, "crash", seconds, f"signal {-rc}: {err[-300:]}")
    checked = case.check is None or case.check(out, err)
    if case.expect == "ok" or (case.expect == "either" and rc == 0):
        good = rc == 0 and checked
        return Outcome(case.name, case.category, "ok" if good else "wrong-exit", seconds, "" if good else f"rc {rc}: {err[-300:]}")
    errors = [line for line in lines if case.marker in line]
    if rc in (1, 2) and len(errors) == 1 and checked:
        return Outcome(case.name, case.category, "clean-error", seconds, errors[0][:200])
    return Outcome(case.name, case.category, "wrong-exit", seconds, f"rc {rc}: {err[-300:]}")


def run_case(case: Case, cwd: Path) -> Outcome:
    """Run ``openqa`` (or the case's program) with the case's arguments, input and environment, and judge the run."""
    argv = [*(case.program or [OPENQA]), *case.argv]
    if case.memory_kb:
        argv = ["bash", "-c", f'ulimit -v {case.memory_kb} && exec "$@"', "openqa", *argv]
    stdin: Any = subprocess.PIPE
    if case.stdin_file:
        stdin = open(case.stdin_file, "rb")
    elif case.stdin_closed:
        stdin = subprocess.DEVNULL  # then closed in the child
    if case.setup:
        case.setup()
    start = time.perf_counter()

    def prepare() -> None:
        default_sigint()
        if case.stdin_closed:
            os.close(0)

    stdout: Any = open(case.stdout_file, "ab") if case.stdout_file else subprocess.PIPE
    try:
        proc = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=cwd,
                                env={**os.environ, **case.env}, preexec_fn=prepare)
        try:
            out, err = proc.communicate(None if stdin is not subprocess.PIPE else case.stdin or b"", timeout=HANG_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return judge(case, None, "", "", time.perf_counter() - start)
    finally:
        if case.stdin_file:
            stdin.close()
        if case.stdout_file:
            stdout.close()
    return judge(case, proc.returncode, (out or b"").decode(errors="replace"), err.decode(errors="replace"),
                 time.perf_counter() - start)


def said(text: str) -> Callable[[str, str], bool]:
    """A check: standard error says ``text``."""
    return lambda out, err: text in err
