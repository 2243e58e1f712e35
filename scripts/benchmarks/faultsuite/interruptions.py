"""Interruptions: SIGINT and SIGKILL of ``openqa index`` (every engine that runs here), ``openqa
eval`` and ``openqa tune --method ensemble`` at random moments; then the index under its name must
still answer exactly as the complete one did (after the recovery a later open does), a later build
must leave no scratch folder, no JVM crash log may land in the working folder, every result summary
must agree with the files beside it, a Ctrl-C may leave no temporary result file, and the tuned
weights and their calibration must still be one pair that eval uses."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from faultsuite.tally import OPENQA, STOP_SECONDS, Figures, default_sigint

from openqa import OpenQAError, Solver, Workspace, load_questions, read_result_set

#: Engines whose index builds are interrupted, with how many tries each per signal (slow ones fewer).
ENGINE_TRIES = {"custom": 10, "pmi": 10, "lucene": 10, "word2vec": 4, "dense": 3}
#: The method that scores with each engine's index (to compare an interrupted index with the complete one).
ENGINE_METHOD = {"custom": ("ir-custom", None), "pmi": ("pmi", None), "lucene": ("ir-es", "lucene"),
                 "dense": ("dense", None), "word2vec": (None, None)}


def scores(index_dir: Path, data: Path, engine: str) -> Any:
    """What the ``engine`` index answers for the dev questions (None when it cannot be opened)."""
    name, via = ENGINE_METHOD[engine]
    workspace = Workspace(data_dir=data, index_dir=index_dir)
    try:
        if name is None:  # word vectors: compare the vectors themselves
            index = workspace.context().open("en", engine)
            return [round(float(x), 5) for x in index.vectors[:50].ravel()]
        solver = Solver.open(name, "en", exam="us", engine=via, workspace=workspace)
        scored = solver.score_all(load_questions("us", "dev", data)[:20])
        return [[round(v, 4) for v in r.scores.values()] for r in scored.results]
    except OpenQAError:
        return None


def interrupt(argv: list[str], cwd: Path, after: float, sig: signal.Signals) -> tuple[str, str]:
    """Start ``openqa argv``, send ``sig`` after ``after`` seconds; the verdict and stderr's tail."""
    proc = subprocess.Popen([OPENQA, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_sigint)
    try:
        proc.wait(timeout=after)
        return "finished", ""
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "hang", ""
    err = err.decode(errors="replace")
    if sig == signal.SIGKILL:
        return "killed", ""
    if proc.returncode == 0 and "Traceback" not in err:
        return "finished", ""  # the signal came as the work ended
    if "Traceback" in err:  # from the line before it (an "Exception ignored in" names the finalizer)
        start = err.rfind("\n", 0, max(err.find("Traceback") - 1, 0)) + 1
        return "traceback", err[start:start + 1200]
    return ("clean-stop" if proc.returncode == 130 and "interrupted" in err else "wrong-exit"), f"rc {proc.returncode}: {err[-300:]}"


def interrupt_builds(engine: str, tries: int, root: Path, data: Path, figures: Figures, rng: random.Random) -> None:
    """Interrupt index builds of ``engine`` over a complete index and check what is left."""
    index_dir = root / f"ix-{engine}"
    cwd = root / f"cwd-{engine}"
    cwd.mkdir(exist_ok=True)
    build = ["index", "--lang", "en", "--engine", engine, "--data-dir", str(data), "--index-dir", str(index_dir)]
    start = time.perf_counter()
    if subprocess.run([OPENQA, *build], cwd=cwd, capture_output=True).returncode != 0:
        figures.failures.append({"name": f"{engine} build", "verdict": "cannot build here: skipped"})
        return
    full = time.perf_counter() - start
    reference = scores(index_dir, data, engine)
    for sig in (signal.SIGINT, signal.SIGKILL):
        for _ in range(tries):
            name = f"{engine} index {sig.name}"
            figures.stopped(name, *interrupt(build, cwd, rng.uniform(0.2, full * 1.1), sig))
            now = scores(index_dir, data, engine)
            if now is None:
                figures.indexes_lost += 1
                figures.failures.append({"name": name, "verdict": "index lost"})
            elif now != reference:
                figures.indexes_half_written += 1
                figures.failures.append({"name": name, "verdict": "index answers differently"})
    subprocess.run([OPENQA, *build], cwd=cwd, capture_output=True)
    leftovers = [p.name for p in index_dir.iterdir() if p.name.startswith(".")]
    figures.scratch_left += len(leftovers)
    if leftovers:
        figures.failures.append({"name": f"{engine} scratch", "verdict": "left after a later build", "detail": leftovers})
    logs = list(cwd.glob("hs_err_pid*.log"))
    figures.crash_logs += len(logs)


def interrupt_evals(tries: int, root: Path, data: Path, figures: Figures, rng: random.Random) -> None:
    """Interrupt ``openqa eval`` and check that every result summary agrees with the files beside it."""
    out = root / "eval-out"
    argv = ["eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data), "--index-dir", str(root / "indexes"), "--output", str(out)]
    start = time.perf_counter()
    subprocess.run([OPENQA, *argv], cwd=root, capture_output=True)
    full = time.perf_counter() - start
    for sig in (signal.SIGINT, signal.SIGKILL):
        for _ in range(tries):
            figures.stopped(f"eval {sig.name}", *interrupt(argv, root, rng.uniform(0.2, full * 1.1), sig))
            temporaries = [p.name for p in out.glob(".*.tmp")] if sig == signal.SIGINT else []
            figures.temporaries_left += len(temporaries)
            if temporaries:
                figures.failures.append({"name": f"eval {sig.name}", "verdict": "temporary files left", "detail": temporaries})
            for summary in out.glob("*.json"):
                try:
                    read_result_set(summary)
                except OpenQAError as exc:
                    figures.result_sets_inconsistent += 1
                    figures.failures.append({"name": f"eval {sig.name}", "verdict": "result set inconsistent", "detail": str(exc)})


def interrupt_tunes(tries: int, root: Path, data: Path, figures: Figures, rng: random.Random) -> None:
    """Interrupt ``openqa tune --method ensemble`` over a complete tune: after a Ctrl-C what it writes
    (weights and calibration) has landed together or not at all, so eval uses the pair on disk (a
    Ctrl-C between the two used to leave a pair that eval used without a word). A SIGKILL between
    the two writes cannot be held off: the pair it leaves must be refused in one line."""
    settings = root / "tuned-ensemble"
    loc = ["--data-dir", str(data), "--index-dir", str(root / "indexes"), "--settings-dir", str(settings)]
    argv = ["tune", "--method", "ensemble", "--dataset", "us", *loc]
    check = [OPENQA, "eval", "--method", "ensemble", "--dataset", "us", "--split", "dev", "--limit", "5", *loc,
             "--output", str(root / "tune-out")]
    start = time.perf_counter()
    subprocess.run([OPENQA, *argv], cwd=root, capture_output=True, check=True, preexec_fn=default_sigint)
    full = time.perf_counter() - start
    for sig in (signal.SIGINT, signal.SIGKILL):
        for _ in range(tries):
            name = f"tune ensemble {sig.name}"
            figures.stopped(name, *interrupt(argv, root, rng.uniform(0.2, full * 1.1), sig))
            done = subprocess.run(check, cwd=root, capture_output=True, text=True, preexec_fn=default_sigint)
            errors = [line for line in done.stderr.splitlines() if "error" in line]
            if sig == signal.SIGKILL and done.returncode == 2 and len(errors) == 1 and "was fitted with other settings" in errors[0]:
                figures.tuned_pairs_refused += 1
            elif done.returncode != 0:
                figures.result_sets_inconsistent += 1
                figures.failures.append({"name": name, "verdict": "tuned pair unusable", "detail": done.stderr[-300:]})
