"""docs/tasks.md against the record of its commands, ``eval/results/studies/tasks.json``, which
``scripts/maintenance/task_outputs.py`` makes by running them as written on the MedQA data: the page
shows every task's files, commands, quoted outputs and times as the record has them, the record is
of the commands the script runs now, and what the page says the outputs show holds (the README's
figure reproduced, the right answers, the comparison's runs). Nothing is rerun: the record is
committed, so this passes on a clean clone without the data."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tasks.md"
RECORD = ROOT / "eval" / "results" / "studies" / "tasks.json"
RUNS = ROOT / "eval" / "results" / "runs" / "us"


def script(name: str):
    """A script of ``scripts/maintenance/`` as a module (it puts ``scripts/`` on the import path, as run)."""
    sys.path.insert(0, str(ROOT / "scripts" / "maintenance"))
    spec = importlib.util.spec_from_file_location(f"openqa_{name}", ROOT / "scripts" / "maintenance" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def record() -> dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


def output(task: str, step: int) -> list[str]:
    return record()["tasks"][task]["steps"][step]["output"]


def test_the_page_shows_every_task_as_its_record_has_it():
    figures = script("docs_figures")
    page = PAGE.read_text(encoding="utf-8")
    assert figures.stale(page, PAGE.name) == []
    blocks = {m["key"] for m in figures.BLOCK.finditer(page) if m["file"] == "tasks.json"}
    times = {m["key"] for m in figures.FIGURE.finditer(page) if m["file"] == "tasks.json"}
    for name, task in record()["tasks"].items():
        assert f"tasks.{name}.commands" in blocks, name
        assert {f"tasks.{name}.files.{path}" for path in task["files"]} <= blocks, name
        assert {f"tasks.{name}.steps.{i}.output" for i in range(len(task["steps"]))} <= blocks, name
        steps = {f"tasks.{name}.steps.{i}.seconds" for i in range(len(task["steps"]))}
        assert f"tasks.{name}.seconds" in times or steps <= times, f"the page gives no time for {name}"
    assert "books" in times and record()["books"] == 11  # the page says which corpus its English figures are of


def test_the_record_is_of_the_commands_the_script_runs():
    tasks = script("task_outputs").TASKS
    recorded = record()["tasks"]
    assert list(recorded) == list(tasks)
    for name, task in tasks.items():
        assert recorded[name]["commands"] == [step.command for step in task.steps], f"rerun the script: {name} changed"
        assert recorded[name]["files"] == task.files, f"rerun the script: the files of {name} changed"
        assert [step["command"] for step in recorded[name]["steps"]] == recorded[name]["commands"]
    assert {"command", "date", "machine", "openqa_version", "clean_copy_of"} <= set(record())


def test_what_the_page_says_of_the_outputs_holds():
    readme_row = json.loads((RUNS / "us-test-ir-custom.json").read_text())
    line = output("reproduce", 0)[0]
    assert line.startswith(f"us test ir-custom: {readme_row['accuracy']:.2f}% (") and f"/{readme_row['n']})" in line
    assert "32.60<!-- fig us-test-ir-custom.json:accuracy:.2f -->" in PAGE.read_text(encoding="utf-8")
    # both questions of task 1 answered right: Aspirin, and poststreptococcal glomerulonephritis (B in question.txt)
    assert output("answer", 0)[0] == output("answer", 1)[0] == "Prediction: B"
    assert "B: Poststreptococcal glomerulonephritis" in record()["tasks"]["answer"]["files"]["question.txt"]
    # the own corpus: the shipped settings' notice naming tune --questions, the right answer, 1 in 3 with them and
    # 3 in 3 with the best paragraph; then the fit on the quiz, filed for the corpus, which answer uses without a note
    assert output("own-corpus", 1)[:2] == [
        "openqa: settings tuned on 11 books; this corpus has 2: retune on questions you hold the answers of: "
        "openqa tune --method ir-custom --questions FILE --lang en --corpus mine",
        "Prediction: B"]
    assert "(1/3)" in output("own-corpus", 2)[0] and "(3/3)" in output("own-corpus", 3)[0]
    tuned = "\n".join(output("own-corpus", 4))
    assert "fitted on quiz.jsonl (sha256 " in tuned and "tuned/ir-custom-us-corpus-mine.calibration.json" in tuned
    assert output("own-corpus", 5)[0] == "Prediction: B" and not any(line.startswith("openqa:") for line in output("own-corpus", 5))
    compared = "\n".join(output("compare", 0))
    for name in ("us-test-ir-custom.json", "us-test-ensemble.json"):
        run = json.loads((RUNS / name).read_text())
        assert f"| {name} | {run['method']} | {run['accuracy']:.2f} " in compared
    ensemble = json.loads((RUNS / "us-test-ensemble-qwen2.5-coder-1.5b-q4km-cc324af0-options-t512-dev1000-limit600.json").read_text())
    line = output("llm-part", 1)[0]  # the record's figure, on as many questions
    assert line.startswith(f"us test ensemble: {ensemble['accuracy']:.2f}% (") and f"/{ensemble['n']})" in line
    # the command the record was made with (where its files went aside: a record rerun in place names its folder)
    made = ensemble["command"].removesuffix(" --output eval/results/runs/us")
    assert record()["tasks"]["llm-part"]["commands"][1] == made
