"""Figures that must be what they say (the sixth round's high and medium items): a ``--bank`` file
that holds the questions scored (refused in eval and tune, or allowed and counted), bank files named
by their content (the same file twice refused; two files of one name in two folders give two
records), ``--bank`` where no part reads it, ``--exam`` beside ``--dataset``, a record written with
other settings (never replaced) and a run of the same name in progress (refused at once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from faultsuite.tally import Case, said

#: A process that holds a result's lock until its standard input closes (what ``result_lock`` takes).
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""
#: Lock holders started, closed by ``release_holders`` when the suite ends.
HOLDERS: list[subprocess.Popen[str]] = []


def release_holders() -> None:
    """Let every lock holder go (their standard input closes) and wait for them."""
    for holder in HOLDERS:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=30)
    HOLDERS.clear()


def leak_cases(loc: list[str], root: Path, data: Path) -> list[Case]:
    """The cases; ``data`` is the synthetic data folder (its dev and test splits hold the same questions)."""
    test = (data / "questions" / "US" / "4_options" / "phrases_no_exclude_test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    files = {}
    for folder, lines in (("leak-a", test), ("leak-b", test[:10])):  # one file name in two folders, other content
        (root / folder).mkdir()
        files[folder] = root / folder / "copy-of-test.jsonl"
        files[folder].write_text("".join(lines), encoding="utf-8")
    leak, other = str(files["leak-a"]), str(files["leak-b"])
    out = root / "out-leaks"
    ev = ["eval", "--dataset", "us", "--split", "test", "--limit", "20", *loc, "--output", str(out)]
    bank = [*ev, "--method", "bank"]
    tuned = root / "tuned-leak"
    nothing_written = lambda text: lambda o, e: text in e and not list(out.glob("*.json")) and not list(tuned.glob("*.json"))  # noqa: E731
    records = lambda o, e: len(list(out.glob("us-test-bank-bank-*-limit20.json"))) == 2  # noqa: E731
    taken = root / "out-taken"
    taken.mkdir()

    def other_settings() -> None:
        (taken / "us-test-ir-custom-limit20.json").write_text(json.dumps({"dataset": "us", "split": "test", "settings": {"top_n": 99}}))

    def run_in_progress() -> None:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(taken / ".us-test-pmi-limit20.lock")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        holder.stdout.readline()  # it holds the lock now
        HOLDERS.append(holder)

    at = [*loc, "--output", str(taken)]
    return [
        Case("a bank file holding the split (bank)", "leaks", [*bank, "--bank", leak],
             check=nothing_written("holds 20 of the 20 questions scored")),
        Case("a bank file holding dev (tune)", "leaks", ["tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,bank",
                                                          "--ensemble", "leak", "--bank", leak, "--limit", "20", *loc, "--settings-dir", str(tuned)],
             check=nothing_written("holds 20 of the 20 questions scored")),
        Case("a bank file holding the split, allowed and counted", "leaks", [*bank, "--bank", leak, "--allow-bank-overlap"], expect="ok",
             check=lambda o, e: "the bank holds copies of 20 of the 20 questions scored" in o),
        Case("the same bank file twice", "leaks", [*bank, "--bank", leak, "--bank", leak], check=said("give each file once")),
        Case("a bank file of the same name in another folder", "leaks", [*bank, "--bank", other, "--allow-bank-overlap"], expect="ok",
             check=records),
        Case("--bank for a method without a bank", "leaks", [*ev, "--method", "ir-custom", "--bank", leak],
             check=said("--bank applies to a method that reads solved questions")),
        Case("--bank for tune of a method without a bank", "leaks",
             ["tune", "--method", "ir-custom", "--dataset", "us", "--limit", "5", "--bank", leak, *loc, "--settings-dir", str(tuned)],
             check=said("--bank applies to a method that reads solved questions")),
        Case("--exam beside --dataset", "leaks", [*ev, "--exam", "tw"], check=said("--exam applies to --questions")),
        Case("a record with other settings", "leaks", ["eval", "--dataset", "us", "--split", "test", "--limit", "20", *at],
             check=said("holds a run with another settings.top_n"), setup=other_settings),
        Case("a run of the same name in progress", "leaks", ["eval", "--dataset", "us", "--split", "test", "--limit", "20", "--method", "pmi", *at],
             check=said("is being written in"), setup=run_in_progress),
    ]
