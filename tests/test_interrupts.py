"""Ctrl-C (and SIGTERM) wherever it lands: while the command loads, while result files are written
or take their names, as an index's scratch folder appears or between the renames of its swap, and
in a finalizer run by the garbage collector. The command ends with exit 130 and one line, and what
was on disk is all old or all new, never a mix."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openqa import cli
from openqa.cli import main
from openqa.evaluate.results import read_result_set, write_all_or_none
from openqa.retrieval.manifest import atomic_folder
from tests.helpers import HANG_S, TOP1


def result_set(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


#: The console script, with a Ctrl-C arriving as its command's modules load (where the fault suite's
#: interruptions found it, on a busy machine): an import hook raises it when openqa.config is imported.
CTRL_C_WHILE_LOADING = """
import sys
class CtrlC:
    def find_spec(self, name, path, target=None):
        if name == "openqa.config":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
from openqa.cli import main
sys.exit(main())
"""


@pytest.mark.spawns
def test_a_ctrl_c_while_the_command_loads_is_an_interruption_not_a_traceback():
    done = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_LOADING, "--help"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (130, "openqa: interrupted\n")


def test_a_ctrl_c_during_the_renames_is_held_until_all_are_new(tmp_path, monkeypatch, ctrl_c):
    files = {tmp_path / name: "old" for name in ("x.predictions.jsonl", "x.md", "x.json")}
    write_all_or_none(files)
    replace = Path.replace

    def interrupted_rename(self, target):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the first file takes its name
        return replace(self, target)

    monkeypatch.setattr(Path, "replace", interrupted_rename)
    with pytest.raises(KeyboardInterrupt):
        write_all_or_none(dict.fromkeys(files, "new"))
    monkeypatch.undo()
    assert result_set(tmp_path) == {path.name: b"new" for path in files}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_eval_interrupted_while_writing_keeps_a_consistent_result_set(indexed, tmp_path, monkeypatch, capsys, ctrl_c):
    """``openqa eval`` hit by Ctrl-C as it writes its second result file: the previous run's files
    are all there, unchanged; hit as the files take their names: the new set is whole."""
    out = tmp_path / "out"
    argv = ["eval", "--dataset", "us", "--split", "dev", "--output", str(out), *TOP1, *indexed]
    assert main(argv) == 0
    summary = next(out.glob("*.json"))
    old = result_set(out)
    write_text = Path.write_text

    def ctrl_c_on_second_file(self, *args, **kwargs):
        if self.name.endswith(".md.tmp"):
            os.kill(os.getpid(), signal.SIGINT)
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", ctrl_c_on_second_file)
    assert main(argv) == 130
    monkeypatch.undo()
    assert result_set(out) == old
    marked = next(out.glob("*.md"))
    marked.write_text("the previous run's")  # so the new set differs from it even when a quick run repeats its bytes
    replace = Path.replace

    def ctrl_c_on_first_rename(self, target):
        if self.name.endswith(".predictions.jsonl.tmp"):
            os.kill(os.getpid(), signal.SIGINT)
        return replace(self, target)

    monkeypatch.setattr(Path, "replace", ctrl_c_on_first_rename)
    assert main(argv) == 130
    monkeypatch.undo()
    assert sorted(result_set(out)) == sorted(old) and marked.read_text() != "the previous run's"
    read_result_set(summary)  # the new set is whole: every file's digest matches its summary
    assert "openqa: interrupted" in capsys.readouterr().err


def test_a_ctrl_c_as_the_scratch_folder_appears_leaves_nothing(tmp_path, monkeypatch):
    mkdir = Path.mkdir

    def interrupted(self, *args, **kwargs):
        mkdir(self, *args, **kwargs)
        if ".building-" in self.name:
            raise KeyboardInterrupt
        return None

    monkeypatch.setattr(Path, "mkdir", interrupted)
    with pytest.raises(KeyboardInterrupt), atomic_folder(tmp_path / "en-custom"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_ctrl_c_between_the_renames_of_an_index_swap_lands_after_both(tmp_path, monkeypatch):
    final = tmp_path / "en-custom"
    final.mkdir()
    (final / "manifest.json").write_text("old")
    rename = Path.rename

    def ctrl_c_on_the_first_rename(self, target):
        if self == final:
            os.kill(os.getpid(), signal.SIGINT)
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", ctrl_c_on_the_first_rename)
    # Python's own Ctrl-C handler, whatever the suite was started with (started with & from a
    # script, it inherits SIGINT ignored, and the kill above would pass unnoticed)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with atomic_folder(final) as scratch:
                (scratch / "manifest.json").write_text("new")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (final / "manifest.json").read_text() == "new"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interruption_that_lands_in_a_finalizer_still_stops_the_command(monkeypatch, capsys, ctrl_c, signum):
    """numba deletes llvmlite objects while a kernel loads: a Ctrl-C whose handler ran in such a
    finalizer was printed as "Exception ignored in ..." and the command ran on to exit 0."""
    ran_on = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            signal.raise_signal(signum)

    def command(args: object) -> None:
        Cycle()
        gc.collect()
        ran_on.append(args)

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setitem(cli.COMMANDS, "serve", command)
    assert main(["serve"]) == 130
    err = capsys.readouterr().err
    assert ran_on == [] and err == "openqa: interrupted\n"
    assert sys.getprofile() is None


#: The console script whose command ends while another thread is still inside native code (as a
#: stopped server's model thread can be, in the middle of a prompt in llama.cpp), with a clean-up at
#: exit that waits for that call, as the library's does: the interpreter's own exit would wait for ever.
ENDS_DURING_A_NATIVE_CALL = """
import atexit, sys, threading
from openqa import cli
from openqa.signals import native_call

running, prompt_done = threading.Event(), threading.Lock()
prompt_done.acquire()  # released when the prompt ends: never, here
atexit.register(prompt_done.acquire)  # the library's clean-up at exit, waiting for the prompt to end

def prompt():
    with native_call():
        running.set()
        threading.Event().wait()

def command(argv):
    threading.Thread(target=prompt, daemon=True).start()
    running.wait()
    print("openqa: interrupted", file=sys.stderr)
    return 130

cli._run = command
sys.exit(cli.main())
"""


@pytest.mark.spawns
def test_the_command_ends_without_waiting_for_a_prompt_still_in_native_code():
    done = subprocess.run([sys.executable, "-c", ENDS_DURING_A_NATIVE_CALL], capture_output=True, text=True, timeout=HANG_S)
    assert (done.returncode, done.stderr) == (130, "openqa: interrupted\n")
