"""Which evaluation records' figures moved between two commits: accuracy and ECE of every record
under eval/results/ rerun since ``--before`` (its date changed), old beside new.

    python scripts/maintenance/record_moves.py --before REV --name avgql-fixed
    -> eval/results/studies/moves-avgql-fixed.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import record_path
from openqa import run_record

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "eval" / "results"


def old_record(rev: str, path: Path) -> dict | None:
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path.relative_to(ROOT)}"], capture_output=True, text=True)
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit whose records are the old figures")
    parser.add_argument("--name", required=True, help="what the change is called (the output file's name)")
    args = parser.parse_args()
    rows = []
    for path in sorted(RESULTS.rglob("*.json"), key=lambda p: p.name):
        new = json.loads(path.read_text())
        if not isinstance(new, dict) or not isinstance(new.get("accuracy"), (int, float)) or "split" not in new:
            continue
        old = old_record(args.before, path)
        if old is None or old.get("date") == new.get("date"):
            continue
        rows.append({"record": path.name, "dataset": new.get("dataset"), "split": new["split"], "method": new.get("method"),
                     "n": new.get("n"), "accuracy_before": old.get("accuracy"), "accuracy_after": new["accuracy"],
                     "ece_before": (old.get("confidence") or {}).get("ece"), "ece_after": (new.get("confidence") or {}).get("ece"),
                     "moved": old.get("accuracy") != new["accuracy"]})
    record = {"change": args.name, "before": args.before, "rows": rows, "moved": sum(r["moved"] for r in rows),
              **run_record(f"python scripts/maintenance/record_moves.py --before {args.before} --name {args.name}")}
    out = record_path(f"moves-{args.name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"{len(rows)} records rerun, {record['moved']} moved; wrote {out}")


if __name__ == "__main__":
    main()
