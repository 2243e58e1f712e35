"""A compact ensemble part from an LLM run's predictions: one JSON line per question with its content
digest, the letter probabilities and their scale (what ``--predictions PART=FILE`` reads; see
``openqa.scorers.precomputed``), filed under the model's identity, so that the LLM ensemble can be
refitted and re-evaluated from the records alone, without the model.

    python scripts/studies/llm_part.py RUN.predictions.jsonl --model FILE.gguf --name qwen2.5-coder-1.5b-q4km
    -> eval/results/llm-parts/<name>-<sha12>-<dataset>-<split>.jsonl (+ .json: the run's record, the model's sha256)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import RESULTS, file_sha256, shareable
from openqa import run_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", type=Path, help="an openqa eval .predictions.jsonl of --method llm")
    parser.add_argument("--model", type=Path, required=True, help="the GGUF file the run used (its sha256 names the part)")
    parser.add_argument("--name", required=True, help="a short name of the model for file names")
    args = parser.parse_args()
    record_path = args.predictions.with_name(args.predictions.name.removesuffix(".predictions.jsonl") + ".json")
    record = json.loads(record_path.read_text())
    model_sha = file_sha256(args.model)
    rows = [json.loads(line) for line in args.predictions.read_text().splitlines() if line.strip()]
    missing = [r["qid"] for r in rows if "digest" not in r or "scale" not in r]
    if missing:
        raise SystemExit(f"{args.predictions}: rows without digest or scale (first {missing[0]}): rerun openqa eval")
    out_dir = RESULTS / "llm-parts"
    out_dir.mkdir(exist_ok=True)
    stem = f"{args.name}-{model_sha[:12]}-{record['dataset']}-{record['split']}"
    (out_dir / f"{stem}.jsonl").write_text("".join(
        json.dumps({"qid": r["qid"], "digest": r["digest"], "scores": r["scores"], "scale": r["scale"]}) + "\n" for r in rows))
    # the run was made in slices that share a reply cache (growing --limit, or --offset ranges): the
    # model's own seconds are the sum of each slice's new calls, which their records keep
    slices = sorted(args.predictions.parent.glob(f"{record['dataset']}-{record['split']}-llm-{record['variant']}*.json"))
    slice_records = [json.loads(p.read_text()) for p in slices]
    model_seconds = sum(r.get("model_reported_seconds") or 0 for r in slice_records)
    # fewer calls than questions: some replies came from a cache another run filled (the same prompt)
    model_calls = sum(r.get("model_calls") or 0 for r in slice_records)
    meta = {"dataset": record["dataset"], "split": record["split"], "method": "llm", "n": record["n"],
            # None: every slice record was made from the reply cache (the runs that asked the model left none)
            "model_seconds_all_slices": round(model_seconds, 1) or None,
            "model_calls_all_slices": model_calls or None,
            "evidence_paragraphs_per_question": round(sum(len(r.get("evidence_ids") or []) for r in rows) / len(rows), 2),
            "slices": [p.name for p in slices], "record": record_path.name,
            "ci95": record.get("ci95"),
            "accuracy": record["accuracy"], "model": args.model.name, "model_sha256": model_sha,
            "model_bytes": args.model.stat().st_size, "questions_per_second": record.get("questions_per_second"),
            "model_reported_seconds": record.get("model_reported_seconds"), "settings": record.get("settings"),
            "run_command": record.get("command"), "run_date": record.get("date"), "limit": record.get("limit"),
            **run_record(f"python scripts/studies/llm_part.py {args.predictions.name} --model {args.model.name} --name {args.name}")}
    (out_dir / f"{stem}.json").write_text(json.dumps(shareable(meta), indent=2) + "\n")
    print(f"wrote {out_dir / stem}.jsonl ({len(rows)} questions) and .json")


if __name__ == "__main__":
    main()
