"""``scripts/studies/llm_part.py``: a compact LLM part put together from a run's slices and an earlier
part, in question order, written all or none; overlapping slices, another run's slice and a name
that is not a file name are refused in one line with nothing written; slices written under the
scale's former name and newer ones make a part read as one scale."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from openqa.scorers.precomputed import PrecomputedScorer

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "llm_part.py"


def slice_files(folder: Path, start: int, answers: str, variant: str = "tiny-options", scale: str = "probability",
                settings: dict | None = None) -> Path:
    """A slice's predictions (questions start+1 ...) and its record, as openqa eval writes them
    (``scale``: what an older openqa wrote, ``log-probability``, or another name; ``settings``: the
    record's, if any)."""
    stem = f"us-test-llm-{variant}-from{start}-limit{len(answers)}"
    rows = [{"qid": f"us-test-{start + i + 1}", "digest": f"d{start + i + 1}", "scores": {"A": 0.7, "B": 0.3},
             "scale": scale, "correct": letter == "A"} for i, letter in enumerate(answers)]
    (folder / f"{stem}.predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    accuracy = round(100 * answers.count("A") / len(answers), 2)
    (folder / f"{stem}.json").write_text(json.dumps({"dataset": "us", "split": "test", "method": "llm", "n": len(answers),
                                                     "accuracy": accuracy, "variant": f"{variant}-from{start}",
                                                     "model_reported_seconds": 10.0, "model_calls": len(answers),
                                                     **({"settings": settings} if settings is not None else {})}))
    return folder / f"{stem}.predictions.jsonl"


def run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_slices_and_an_earlier_part_make_one_part_in_question_order(tmp_path):
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    out = tmp_path / "parts"
    out.mkdir()
    first, second, third = slice_files(tmp_path, 0, "AB"), slice_files(tmp_path, 2, "AA"), slice_files(tmp_path, 4, "BB")
    done = run(second, first, "--model", model, "--name", "tiny", "--output-dir", out)
    assert done.returncode == 0, done.stderr
    (part,) = out.glob("*.jsonl")
    assert [json.loads(line)["qid"] for line in part.read_text().splitlines()] == [f"us-test-{i}" for i in (1, 2, 3, 4)]
    done = run(third, "--model", model, "--name", "tiny", "--output-dir", out, "--extend", part)
    assert done.returncode == 0, done.stderr
    meta = json.loads(part.with_suffix(".json").read_text())
    assert meta["n"] == 6 and meta["accuracy"] == 50.0  # 3 of 6 answered A
    assert meta["model_seconds_all_slices"] == 30.0 and meta["extends"] == part.name
    assert len(part.read_text().splitlines()) == 6


def test_a_part_of_old_slices_extended_with_new_ones_reads_as_one_scale_of_probabilities(tmp_path):
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    out = tmp_path / "parts"
    out.mkdir()
    old = slice_files(tmp_path, 0, "AB", scale="log-probability")  # written before the scale was named for its numbers
    assert run(old, "--model", model, "--name", "tiny", "--output-dir", out).returncode == 0
    (part,) = out.glob("*.jsonl")
    done = run(slice_files(tmp_path, 2, "AA"), "--model", model, "--name", "tiny", "--output-dir", out, "--extend", part)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["scale"] for line in part.read_text().splitlines()] == ["log-probability"] * 2 + ["probability"] * 2
    read = PrecomputedScorer(part, "llm")  # the rows as they were written, each name read as the scale it names now
    assert read.scale == "probability" and [row["scores"] for row in read.by_digest.values()] == [{"A": 0.7, "B": 0.3}] * 4


def test_slices_may_differ_in_how_they_were_computed_and_nothing_else(tmp_path):
    """Slices run before and after llama.cpp's prompt reuse (which gives a cold run's bits) make one
    part that lists both ways; slices of another evidence budget are refused."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    out = tmp_path / "parts"
    out.mkdir()
    cold = {"evidence_tokens": 512, "prompt_cache": "off", "runs_on": "llama.cpp, 1 thread"}
    assert run(slice_files(tmp_path, 0, "AB", settings=cold), "--model", model, "--name", "tiny", "--output-dir", out).returncode == 0
    (part,) = out.glob("*.jsonl")
    reuse = slice_files(tmp_path, 2, "AA", settings={**cold, "prompt_cache": "exact reuse"})
    done = run(reuse, "--model", model, "--name", "tiny", "--output-dir", out, "--extend", part)
    assert done.returncode == 0, done.stderr
    meta = json.loads(part.with_suffix(".json").read_text())
    assert meta["settings"] == cold and meta["settings_differing"] == {"prompt_cache": ["off", "exact reuse"]}
    again = slice_files(tmp_path, 4, "BB", settings=cold)  # a later cold slice keeps what the part says of the earlier ones
    assert run(again, "--model", model, "--name", "tiny", "--output-dir", out, "--extend", part).returncode == 0
    assert json.loads(part.with_suffix(".json").read_text())["settings_differing"] == {"prompt_cache": ["off", "exact reuse"]}
    before = part.read_text()
    other = slice_files(tmp_path, 6, "AA", settings={**cold, "evidence_tokens": 256})
    done = run(other, "--model", model, "--name", "tiny", "--output-dir", out, "--extend", part)
    assert done.returncode == 1 and "the runs differ in their evidence_tokens (512 and 256)" in done.stderr, done.stderr
    assert part.read_text() == before


def test_overlaps_other_runs_and_bad_names_are_refused_with_nothing_written(tmp_path):
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    out = tmp_path / "parts"
    out.mkdir()
    first = slice_files(tmp_path, 0, "AB")
    other = slice_files(tmp_path, 2, "AB", variant="other-question")
    for args, message in [
        ((first, first), "question us-test-1 is in two of the files"),
        ((first, other), "is not a slice of the same LLM run"),
        ((first, "--name", "../up"), "use letters, digits"),
        ((tmp_path / "none.predictions.jsonl",), "with its .json record beside it"),
    ]:
        named = () if "--name" in args else ("--name", "tiny")
        done = run(*args, *named, "--model", model, "--output-dir", out)
        assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert not list(out.iterdir())


@pytest.mark.parametrize("spoil, message", [
    (lambda record, rows: [1], "is not an eval record (a JSON list, not an object)"),
    (lambda record, rows: {k: v for k, v in record.items() if k != "accuracy"}, "its accuracy is None, not a percentage"),
    (lambda record, rows: {**record, "accuracy": "high"}, "its accuracy is 'high', not a percentage"),
    (lambda record, rows: {**record, "accuracy": float("nan")}, "its accuracy is nan, not a percentage"),
    (lambda record, rows: {**record, "accuracy": 10 ** 400}, "its accuracy is 10000000000000000000... (401 characters)"),
    (lambda record, rows: {**record, "n": "2"}, "its n is '2', not a number of questions"),
    (lambda record, rows: {**record, "n": 0}, "its n is 0, not a number of questions"),
    (lambda record, rows: {k: v for k, v in record.items() if k != "dataset"}, "its dataset is None, not a name"),
    (lambda record, rows: rows[0].update(qid=5), ":1: its qid and digest must be text"),
    (lambda record, rows: rows[1].update(digest=["d2"]), ":2: its qid and digest must be text"),
    (lambda record, rows: rows[1]["scores"].update(B=float("nan")), ":2: the score of B is nan, not a finite number"),
    (lambda record, rows: rows[0]["scores"].update(A=2.0), ":1: the score of A is 2.0, not a probability from 0 to 1"),
    (lambda record, rows: rows[1]["scores"].update(B=-0.5), ":2: the score of B is -0.5, not a probability from 0 to 1"),
])
def test_records_and_rows_that_cannot_be_counted_are_refused_in_one_line(tmp_path, spoil, message):
    """Each of these ended in a traceback (KeyError, TypeError, ZeroDivisionError, OverflowError) or, for
    a NaN accuracy, a part whose accuracy was NaN."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    out = tmp_path / "parts"
    out.mkdir()
    predictions = slice_files(tmp_path, 0, "AB")
    record_path = predictions.with_name(predictions.name.replace(".predictions.jsonl", ".json"))
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    spoilt = spoil(json.loads(record_path.read_text()), rows)
    if spoilt is not None:
        record_path.write_text(json.dumps(spoilt))
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = run(predictions, "--model", model, "--name", "tiny", "--output-dir", out)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not list(out.iterdir())


@pytest.mark.parametrize("content, message", [(b"\xff\xfe\n", "is not UTF-8 text (invalid start byte at byte 0)"),
                                              (b"[" * 100_000 + b"]" * 100_000, "is not valid JSON (nested too deeply)")])
def test_undecodable_records_are_refused_in_one_line(tmp_path, content, message):
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    predictions = slice_files(tmp_path, 0, "AB")
    predictions.with_name(predictions.name.replace(".predictions.jsonl", ".json")).write_bytes(content)
    done = run(predictions, "--model", model, "--name", "tiny", "--output-dir", tmp_path)
    assert done.returncode == 1 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_folder_at_an_output_name_leaves_both_outputs_as_they_were(tmp_path):
    """The .jsonl used to take its name before the .json failed on the folder (a traceback): half written."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    out = tmp_path / "parts"
    out.mkdir()
    first = slice_files(tmp_path, 0, "AB")
    assert run(first, "--model", model, "--name", "tiny", "--output-dir", out).returncode == 0
    (part,) = out.glob("*.jsonl")
    before = part.read_text()
    part.with_suffix(".json").unlink()
    part.with_suffix(".json").mkdir()
    done = run(first, slice_files(tmp_path, 2, "AA"), "--model", model, "--name", "tiny", "--output-dir", out)
    assert done.returncode == 1 and "is there and is not a plain file: move it away first" in done.stderr, done.stderr
    assert part.read_text() == before and sorted(p.name for p in out.iterdir()) == sorted([part.name, part.with_suffix(".json").name])


def test_a_password_in_a_run_s_endpoint_is_never_written_into_the_part(tmp_path):
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF tiny")
    predictions = slice_files(tmp_path, 0, "AB")
    record_path = predictions.with_name(predictions.name.replace(".predictions.jsonl", ".json"))
    endpoint = "http://someone:s3cret@127.0.0.1:8080/v1"  # a record made before openqa refused such an --endpoint
    record_path.write_text(json.dumps({**json.loads(record_path.read_text()), "settings": {"endpoint": endpoint},
                                       "command": f"openqa eval --method llm --endpoint {endpoint}"}))
    out = tmp_path / "parts"
    out.mkdir()
    assert run(predictions, "--model", model, "--name", "tiny", "--output-dir", out).returncode == 0
    (meta,) = out.glob("*.json")
    written = json.loads(meta.read_text())
    assert "s3cret" not in meta.read_text() and written["settings"]["endpoint"] == "http://127.0.0.1:8080/v1"
    assert written["run_commands"] == ["openqa eval --method llm --endpoint http://127.0.0.1:8080/v1"]
