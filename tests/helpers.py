"""Tiny fixture builders shared by the tests: a MedQA-shaped data folder written to tmp_path."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import threading
import time
from pathlib import Path
from typing import Callable

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
