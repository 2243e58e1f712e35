"""Second round of command-line faults: input that used to end in a traceback (deep JSON, huge
numbers, endless files, a closed stdin, an ASCII-only stdout, a memory limit), interruptions and a
full disk while result files are written, and what a tied prediction says it assumed."""

from __future__ import annotations

import errno
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openqa import cli
from openqa.answer import written_in
from openqa.cli import main
from openqa.evaluate import results as results_module
from openqa.evaluate.results import read_result_set, write_all_or_none
from openqa.retrieval.manifest import atomic_folder
from tests.helpers import make_data_dir
from tests.test_cli import OPENQA, TOP1, run


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> list[str]:
    """Location flags of a data folder and its built custom index."""
    root = tmp_path_factory.mktemp("cli-faults")
    data, indexes = make_data_dir(root), root / "indexes"
    assert main(["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes)]) == 0
    return ["--data-dir", str(data), "--index-dir", str(indexes)]


@pytest.mark.parametrize("engine, method", [("custom", "ir-custom"), ("pmi", "pmi")])
@pytest.mark.parametrize("edit", [1, -1, None], ids=["up", "down", "to-0"])
def test_an_edited_paragraph_count_is_refused_or_harmless(site, tmp_path, engine, method, edit):
    """Never a crash (SIGSEGV, SIGABRT) nor another figure from an index whose manifest lies about its
    size: the custom index, which reads its paragraph store by that count, refuses it in one line;
    the positional index (pmi) keeps no store and does not use the count: refused, or the same figure."""
    data, indexes = Path(site[1]), Path(site[3])
    if not (indexes / f"en-{engine}").is_dir():
        assert main(["index", "--lang", "en", "--engine", engine, *site]) == 0
    argv = ["eval", "--dataset", "us", "--split", "dev", "--method", method, "--json", "--data-dir", str(data),
            "--output", str(tmp_path / "out")]
    before = run(*argv, "--index-dir", str(indexes))
    copy = tmp_path / "indexes"
    shutil.copytree(indexes / f"en-{engine}", copy / f"en-{engine}")
    manifest_path = copy / f"en-{engine}" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["paragraphs"] = 0 if edit is None else manifest["paragraphs"] + edit
    manifest_path.write_text(json.dumps(manifest))
    result = run(*argv, "--index-dir", str(copy))
    if engine == "custom" or result.returncode != 0:
        assert "paragraph" in one_line_error(result)
    else:
        assert json.loads(result.stdout)["accuracy"] == json.loads(before.stdout)["accuracy"]


def one_line_error(result: subprocess.CompletedProcess, code: int = 2) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize("line, message", [
    ("[" * 100_000 + "]" * 100_000, "invalid JSON (nested too deeply)"),
    ('{"id": ' + "7" * 5000 + ', "question": "Why?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}',
     "invalid JSON (Exceeds the limit (4300 digits) for integer string conversion"),
])
def test_question_files_json_cannot_decode_are_one_line_errors(site, tmp_path, line, message):
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    assert f"{path}:1: {message}" in one_line_error(run("eval", "--questions", str(path), *site))


def test_a_jsonl_corpus_with_a_5000_digit_id_is_a_one_line_error(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": 1, "title": "t", "text": "x"}\n{"id": ' + "9" * 5000 + ', "title": "t", "text": "y"}\n')
    err = one_line_error(run("index", "--lang", "en", "--corpus", str(path), "--index-dir", str(tmp_path / "ix")))
    assert f"{path}:2: not valid JSON (Exceeds the limit" in err


def test_endless_input_under_a_memory_limit_is_a_one_line_error(site):
    """``/dev/zero`` is one endless line: refused after 1 MiB, well inside a 4 GB address-space limit."""
    limited = f"ulimit -v 4000000; exec {OPENQA} \"$@\""
    for args in (["eval", "--questions", "/dev/zero", *site], ["answer", *site]):
        result = subprocess.run(["bash", "-c", limited, "openqa", *args], stdin=open("/dev/zero", "rb"),
                                capture_output=True, text=True, timeout=300)
        err = one_line_error(result)
        assert "/dev/zero:1: line longer than 1,048,576 bytes" in err or "standard input holds more than 64 MiB" in err


def test_closed_stdin_is_a_one_line_error(site):
    result = subprocess.run([OPENQA, "answer", *site], preexec_fn=lambda: os.close(0), capture_output=True, text=True,
                            timeout=120)
    assert "standard input is closed" in one_line_error(result)


def test_an_ascii_only_stdout_gets_escapes_not_a_traceback(site):
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    question = ["--question", "Which drug inhibits cyclooxygenase? 阿司匹林", "--option", "A=Aspirin", "--option", "B=肝素", *TOP1]
    shown = subprocess.run([OPENQA, "answer", *question, *site], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "\\u809d\\u7d20" in shown.stdout  # 肝素, escaped
    as_json = subprocess.run([OPENQA, "answer", "--json", *question, *site], capture_output=True, text=True, env=env, timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["options"][1]["text"] == "肝素"


def test_a_tie_says_what_was_assumed(site):
    result = run("answer", "--question", "患者胸痛，应选用哪种药物？ aspirin", "--option", "A=阿司匹林", "--option", "B=肝素", *site)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[1]
    assert first.startswith("Prediction: ") and "(tied: A, B score the same in the en index" in first
    assert "the question was read as English (--lang en), but it looks Chinese: try --lang zh" in first
    english = run("answer", "--question", "Which drug?", "--option", "A=warfarin", "--option", "B=heparin", *site)
    assert "but it looks" not in english.stdout


def test_written_in():
    assert written_in("患者胸痛，应选用哪种药物？ aspirin") == "zh"
    assert written_in("Which drug treats 胸痛?") == "en"
    assert written_in("") == "en"


# --- result files: all old or all new -----------------------------------------------------------


@pytest.fixture
def ctrl_c():
    """Ctrl-C raises KeyboardInterrupt in this process, however the test run was started (a run
    started in the background by a script ignores SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def result_set(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_write_that_fails_leaves_the_old_files_and_no_temporary(tmp_path, monkeypatch):
    old = {tmp_path / "a.json": "old a", tmp_path / "b.md": "old b"}
    write_all_or_none(old)
    before = result_set(tmp_path)
    write_text = Path.write_text
    for failure in (KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")):
        calls = []

        def second_write_fails(self, *args, failure=failure, calls=calls, **kwargs):
            calls.append(self)
            if len(calls) == 2:
                write_text(self, "half")  # the disk took part of it
                raise failure
            return write_text(self, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", second_write_fails)
        with pytest.raises(type(failure)):
            write_all_or_none({path: "new" for path in old})
        monkeypatch.undo()
        assert result_set(tmp_path) == before  # nothing new, no hidden .tmp


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


def test_eval_interrupted_while_writing_keeps_a_consistent_result_set(site, tmp_path, monkeypatch, capsys, ctrl_c):
    """``openqa eval`` hit by Ctrl-C as it writes its second result file: the previous run's files
    are all there, unchanged; hit as the files take their names: the new set is whole."""
    out = tmp_path / "out"
    argv = ["eval", "--dataset", "us", "--split", "dev", "--output", str(out), *TOP1, *site]
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
    replace = Path.replace

    def ctrl_c_on_first_rename(self, target):
        if self.name.endswith(".predictions.jsonl.tmp"):
            os.kill(os.getpid(), signal.SIGINT)
        return replace(self, target)

    monkeypatch.setattr(Path, "replace", ctrl_c_on_first_rename)
    assert main(argv) == 130
    monkeypatch.undo()
    assert sorted(result_set(out)) == sorted(old) and result_set(out) != old
    read_result_set(summary)
    assert "openqa: interrupted" in capsys.readouterr().err


def test_a_full_disk_leaves_no_temporary_file(site, tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_text = Path.write_text

    def disk_full(self, *args, **kwargs):
        if self.name.endswith(".tmp") and self.parent == out:
            write_text(self, "x")
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full)
    assert main(["eval", "--dataset", "us", "--split", "dev", "--output", str(out), *site]) == 1
    assert list(out.iterdir()) == []


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


def test_results_module_holds_no_signal_outside_the_main_thread(tmp_path):
    """In a worker thread (the server) the renames cannot hold signals, and need not: none runs there."""
    import threading

    errors = []
    thread = threading.Thread(target=lambda: errors.append(results_module.write_atomic(tmp_path / "r.json", "{}")))
    thread.start()
    thread.join()
    assert errors == [None] and (tmp_path / "r.json").read_text() == "{}"


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
