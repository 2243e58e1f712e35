"""``scripts/maintenance/rerun_records.py``: which committed records it reruns and which it skips
(with why), the command it reruns (its output a scratch folder, never the committed one), the figures
it compares and the settings differences it reports, on records written by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # benchlib, which the script imports
spec = importlib.util.spec_from_file_location("openqa_rerun_records", ROOT / "scripts" / "maintenance" / "rerun_records.py")
assert spec is not None and spec.loader is not None
rerun_records = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rerun_records)


def record(**fields):
    return {"dataset": "us", "split": "test", "method": "ir-custom", "n": 10, "accuracy": 30.0, "seconds": 2.0,
            "corpus": "en: 11 books", "index": {"engine": "custom"}, "command": "openqa eval --dataset us --split test", **fields}


def test_what_is_rerun_and_what_is_skipped_with_why(tmp_path):
    (tmp_path / "en-custom").mkdir()
    assert rerun_records.why_skipped(record(), 300, tmp_path) is None
    assert "over --max-seconds 300" in rerun_records.why_skipped(record(seconds=301.5), 300, tmp_path)
    assert rerun_records.why_skipped(record(method="llm"), 300, tmp_path).startswith("an LLM run")
    assert rerun_records.why_skipped(record(method="reader"), 300, tmp_path).startswith("a trained reader")
    assert "not an openqa eval command" in rerun_records.why_skipped(record(command="python scripts/bench_llm.py"), 300, tmp_path)
    hybrid = rerun_records.why_skipped(record(method="hybrid", index={"engine": "hybrid"}), 300, tmp_path)
    assert hybrid.startswith("needs the en-dense index") and "en-custom" not in hybrid  # the custom half is there
    assert rerun_records.why_skipped(record(corpus="zh: 33 books"), 300, tmp_path).startswith("needs the zh-custom index")


def test_the_rerun_writes_into_the_scratch_folder_and_finds_a_moved_part_file():
    moved = next((ROOT / "eval" / "results" / "llm-parts").glob("*.jsonl"))
    command = (f"openqa eval --split test --output eval/results --dataset us --method ensemble --json "
               f"--predictions llm=eval/results/{moved.name}")
    args, notes = rerun_records.rerun_command({"command": command}, Path("/scratch/runs/us"))
    assert args == ["eval", "--split", "test", "--dataset", "us", "--method", "ensemble", "--predictions",
                    f"llm=eval/results/llm-parts/{moved.name}", "--output", "/scratch/runs/us"]
    assert notes == [f"eval/results/{moved.name} is now eval/results/llm-parts/{moved.name}"]


def test_figures_and_settings_differences():
    old = record(confidence={"ece": 0.03}, versus_best_part={"ci95": [-0.71, 2.28]},
                 settings={"top_n": 10, "parts": {"dense": {"probabilities": "temperature 9.73"}}, "only_old": 1})
    new = record(confidence={"ece": 0.03}, versus_best_part={"ci95": [-0.55, 2.28]},
                 settings={"top_n": 10.0000001, "parts": {"dense": {"probabilities": "temperature 10.67"}}, "only_new": 2})
    assert rerun_records.figure(old, "versus_best_part.ci95") == [-0.71, 2.28] and rerun_records.figure(old, "versus_baseline.ci95") is None
    assert rerun_records.differences(old["settings"], new["settings"]) == [
        'parts.dense.probabilities: "temperature 9.73" -> "temperature 10.67"']  # 6 significant digits; entries both hold


def test_settings_named_as_shipped_that_ship_otherwise_now():
    """A record made with the shipped settings has none; one whose top-N or temperature the shipped
    files now set otherwise (at any depth: a hybrid's dense part) lists them, as recorded and now."""
    import json

    from openqa.evaluate.calibration import Calibration

    shipped = json.loads((ROOT / "openqa" / "tuned" / "ir-custom-us.json").read_text())["chosen"]
    calibration = Calibration.from_dict(json.loads((ROOT / "openqa" / "tuned" / "dense-us.calibration.json").read_text())["calibration"])
    file, fit = "shipped with openqa: openqa/tuned/ir-custom-us.json", "shipped with openqa: openqa/tuned/dense-us.calibration.json"
    today = {"top_n": shipped["top_n"], "sources": {"top_n": file, "exam": "dataset us"},
             "parts": {"dense": {"probabilities": calibration.describe(), "sources": {"probabilities": fit}}}}
    assert rerun_records.settings_changed(record(settings=today)) == []
    older = {**today, "top_n": shipped["top_n"] + 1,
             "parts": {"dense": {"probabilities": "temperature 1.23 over standardized scores, fitted on MedQA us dev (1272 questions)",
                                 "sources": {"probabilities": fit}}}}
    assert rerun_records.settings_changed(record(settings=older)) == [
        f"settings.top_n: {shipped['top_n'] + 1} -> {shipped['top_n']} (openqa/tuned/ir-custom-us.json)",
        f"settings.parts.dense.probabilities: temperature 1.23 over standardized scores -> "
        f"{calibration.describe().split(', fitted')[0]} (openqa/tuned/dense-us.calibration.json)"]
