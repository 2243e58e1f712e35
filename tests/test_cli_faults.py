"""Command-line input that used to end in a traceback: edited paragraph counts, question files
JSON cannot decode (deep nesting, huge numbers), endless input under a memory limit, a closed stdin,
an ASCII-only stdout, and what a tied prediction says it assumed. (Result files written whole:
``test_outputs.py``; interruptions: ``test_interrupts.py``.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from openqa.answer import written_in
from openqa.cli import main
from tests.helpers import OPENQA, TOP1, one_line_error, run


@pytest.mark.spawns
@pytest.mark.parametrize("engine, method", [("custom", "ir-custom"), ("pmi", "pmi")])
@pytest.mark.parametrize("edit", [1, -1, None], ids=["up", "down", "to-0"])
def test_an_edited_paragraph_count_is_refused_or_harmless(indexed, tmp_path, engine, method, edit):
    """Never a crash (SIGSEGV, SIGABRT) nor another figure from an index whose manifest lies about its
    size: the custom index, which reads its paragraph store by that count, refuses it in one line;
    the positional index (pmi) keeps no store and does not use the count: refused, or the same figure."""
    data, indexes = Path(indexed[1]), Path(indexed[3])
    if not (indexes / f"en-{engine}").is_dir():
        assert main(["index", "--lang", "en", "--engine", engine, *indexed]) == 0
    argv = ["eval", "--dataset", "us", "--split", "dev", "--method", method, "--json", "--data-dir", str(data)]
    before = run(*argv, "--index-dir", str(indexes), "--output", str(tmp_path / "out"))
    copy = tmp_path / "indexes"
    shutil.copytree(indexes / f"en-{engine}", copy / f"en-{engine}")
    manifest_path = copy / f"en-{engine}" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["paragraphs"] = 0 if edit is None else manifest["paragraphs"] + edit
    manifest_path.write_text(json.dumps(manifest))
    result = run(*argv, "--index-dir", str(copy), "--output", str(tmp_path / "out-edited"))  # another index: another record
    if engine == "custom" or result.returncode != 0:
        assert "paragraph" in one_line_error(result)
    else:
        assert json.loads(result.stdout)["accuracy"] == json.loads(before.stdout)["accuracy"]


@pytest.mark.spawns
@pytest.mark.parametrize("line, message", [
    ("[" * 100_000 + "]" * 100_000, "not valid JSON (nested too deeply)"),
    ('{"id": ' + "7" * 5000 + ', "question": "Why?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}',
     "not valid JSON (Exceeds the limit (4300 digits) for integer string conversion"),
])
def test_question_files_json_cannot_decode_are_one_line_errors(indexed, tmp_path, line, message):
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    assert f"{path}:1: {message}" in one_line_error(run("eval", "--questions", str(path), *indexed))


@pytest.mark.spawns
def test_a_jsonl_corpus_with_a_5000_digit_id_is_a_one_line_error(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": 1, "title": "t", "text": "x"}\n{"id": ' + "9" * 5000 + ', "title": "t", "text": "y"}\n')
    err = one_line_error(run("index", "--lang", "en", "--corpus", str(path), "--index-dir", str(tmp_path / "ix")))
    assert f"{path}:2: not valid JSON (Exceeds the limit" in err


@pytest.mark.spawns
def test_endless_input_under_a_memory_limit_is_a_one_line_error(indexed):
    """``/dev/zero`` is one endless line: refused after 1 MiB, well inside a 4 GB address-space limit."""
    limited = f"ulimit -v 4000000; exec {OPENQA} \"$@\""
    for args in (["eval", "--questions", "/dev/zero", *indexed], ["answer", *indexed]):
        result = subprocess.run(["bash", "-c", limited, "openqa", *args], stdin=open("/dev/zero", "rb"),
                                capture_output=True, text=True, timeout=300)
        err = one_line_error(result)
        assert "/dev/zero:1: line longer than 1,048,576 bytes" in err or "standard input holds more than 64 MiB" in err


@pytest.mark.spawns
def test_closed_stdin_is_a_one_line_error(indexed):
    result = subprocess.run([OPENQA, "answer", *indexed], preexec_fn=lambda: os.close(0), capture_output=True, text=True,
                            timeout=120)
    assert "standard input is closed" in one_line_error(result)


@pytest.mark.spawns
def test_an_ascii_only_stdout_gets_escapes_not_a_traceback(indexed):
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    question = ["--question", "Which drug inhibits cyclooxygenase? 阿司匹林", "--option", "A=Aspirin", "--option", "B=肝素", *TOP1]
    shown = subprocess.run([OPENQA, "answer", *question, *indexed], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "\\u809d\\u7d20" in shown.stdout  # 肝素, escaped
    as_json = subprocess.run([OPENQA, "answer", "--json", *question, *indexed], capture_output=True, text=True, env=env, timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["options"][1]["text"] == "肝素"


@pytest.mark.spawns
def test_a_tie_says_what_was_assumed(indexed):
    result = run("answer", "--question", "患者胸痛，应选用哪种药物？ aspirin", "--option", "A=阿司匹林", "--option", "B=肝素", *indexed)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[1]
    assert first.startswith("Prediction: ") and "(tied: A, B score the same in the en index" in first
    assert "the question was read as English (--lang en), but it looks Chinese: try --lang zh" in first
    english = run("answer", "--question", "Which drug?", "--option", "A=warfarin", "--option", "B=heparin", *indexed)
    assert "but it looks" not in english.stdout


def test_written_in():
    assert written_in("患者胸痛，应选用哪种药物？ aspirin") == "zh"
    assert written_in("Which drug treats 胸痛?") == "en"
    assert written_in("") == "en"


# --- result files: all old or all new -----------------------------------------------------------




@pytest.mark.spawns
def test_a_reader_that_leaves_the_pipe_stops_the_command_quietly(indexed, tmp_path):
    """``openqa answer --json ... | head -1``: the command stops when the pipe closes, with the exit
    status of a program SIGPIPE ended and nothing on standard error (no "Broken pipe", no traceback)."""
    questions = tmp_path / "many.txt"
    questions.write_text("\n\n".join(f"Which drug inhibits enzyme {i}?\nA: aspirin\nB: heparin" for i in range(300)) + "\n")
    with open(questions, "rb") as stdin:
        proc = subprocess.Popen([OPENQA, "answer", "--json", *TOP1, *indexed], stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        assert json.loads(proc.stdout.readline())["prediction"] in ("A", "B")
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=300) == 141, err
    assert "Broken pipe" not in err and "Traceback" not in err and "Exception ignored" not in err, err
