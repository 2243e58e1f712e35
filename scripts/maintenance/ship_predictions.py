"""Compact, gzipped copies of eval runs' predictions, for a clean clone to compare and browse.

``openqa eval`` writes ``<stem>.predictions.jsonl`` beside each record; those files are large and
stay out of git. This script writes ``<stem>.predictions.jsonl.gz`` beside the record, keeping per
question only what ``openqa compare`` and the results page read (id, digest, prediction, answer,
whether right, confidence, each option's probability, abstained, tied; not the scores, the replies
or the evidence), in the same order and with the same numbers; ``openqa compare`` and
``serve --results`` read it where the predictions themselves are absent. The predictions must be
the record's (as many questions, as many right: a rerun of the record's command gives them). By
default: every run of a whole test split under ``eval/results/runs`` whose predictions are here.

With ``--part`` it writes instead ``<stem>.part.jsonl``: each question's id, digest, scores and
their scale, as ``--predictions NAME=FILE`` of an ensemble reads them (a trained reader's test run,
for the ensembles that name it), in the predictions' order and with their numbers.

    python scripts/maintenance/ship_predictions.py [--part] [RECORD.json ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import RESULTS, write_atomic

#: What compare and the results page read of a prediction row.
KEPT = ("qid", "digest", "prediction", "answer", "correct", "confidence", "probabilities", "abstained", "tied")
#: What an ensemble reads of a part's row (``--predictions NAME=FILE``).
PART = ("qid", "digest", "scores", "scale")


def whole_test_runs() -> list[Path]:
    """Records of whole test splits (no ``--limit``/``--offset`` slice) whose predictions are here."""
    found = []
    for record in sorted((RESULTS / "runs").glob("*/*-test-*.json")):
        if "-limit" in record.name or "-from" in record.name:
            continue
        if record.with_name(record.name.removesuffix(".json") + ".predictions.jsonl").is_file():
            found.append(record)
    return found


def checked_rows(record: Path) -> list[dict[str, object]]:
    """The rows of ``record``'s predictions, checked to be the record's (as many questions, as many right)."""
    predictions = record.with_name(record.name.removesuffix(".json") + ".predictions.jsonl")
    if not predictions.is_file():
        raise SystemExit(f"ship_predictions: {predictions} is not here: run the eval first")
    rows = []
    for number, line in enumerate(predictions.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise SystemExit(f"ship_predictions: {predictions}:{number}: not valid JSON") from None
    record_figures = json.loads(record.read_text(encoding="utf-8"))
    right = sum(row.get("correct") is True for row in rows)
    if len(rows) != record_figures.get("n") or round(100 * right / max(len(rows), 1), 2) != record_figures.get("accuracy"):
        raise SystemExit(f"ship_predictions: {predictions.name} holds {right}/{len(rows)} right, but {record.name} says "
                         f"{record_figures.get('accuracy')}% of {record_figures.get('n')}: not this record's predictions")
    return rows


def ship(record: Path) -> tuple[Path, int]:
    """Write the compact copy of ``record``'s predictions (deterministic bytes: no name or time in
    the gzip header); return it and its size."""
    lines = [json.dumps({key: row[key] for key in KEPT if key in row}, ensure_ascii=False) for row in checked_rows(record)]
    target = record.with_name(record.name.removesuffix(".json") + ".predictions.jsonl.gz")
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
        out.write(("\n".join(lines) + "\n").encode("utf-8"))
    tmp.replace(target)
    return target, target.stat().st_size


def ship_part(record: Path) -> tuple[Path, int]:
    """Write ``record``'s predictions as an ensemble part (``<stem>.part.jsonl``); return it and its size."""
    rows = checked_rows(record)
    missing = [key for key in PART if any(key not in row for row in rows)]
    if missing:
        raise SystemExit(f"ship_predictions: {record.name}'s predictions have no {', '.join(missing)}: "
                         "only a run that scores each option (a reader's, a method's) makes a part")
    target = record.with_name(record.name.removesuffix(".json") + ".part.jsonl")
    write_atomic(target, "".join(json.dumps({key: row[key] for key in PART}, ensure_ascii=False) + "\n" for row in rows))
    return target, target.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="*", type=Path, help="eval records (.json) whose predictions to ship "
                        "(default: every whole test run under eval/results/runs)")
    parser.add_argument("--part", action="store_true", help="write each record's scores as an ensemble part "
                        "(<stem>.part.jsonl, for --predictions NAME=FILE) instead of the gzipped compact copy")
    args = parser.parse_args()
    if args.part and not args.records:
        parser.error("--part needs the records to make parts of")
    total = 0
    for record in args.records or whole_test_runs():
        target, size = (ship_part if args.part else ship)(record)
        total += size
        print(f"{target.relative_to(RESULTS.parent.parent) if target.is_relative_to(RESULTS.parent.parent) else target} "
              f"({size / 1024:.0f} KB)")
    print(f"{total / 1e6:.2f} MB in all")


if __name__ == "__main__":
    main()
