"""Rerun the committed eval records that take minutes, each into a scratch folder (never over a
committed record), and report every figure that moved: which records were checked, which moved
(recorded against now, with the settings that differ), which were skipped and why, and, for every
record, the settings it names as shipped that the shipped files (``openqa/tuned/``) now set otherwise.

    OPENQA_DATA=... OPENQA_INDEXES=... python scripts/maintenance/rerun_records.py --name 2026-11-28
    -> eval/results/studies/rerun-records-2026-11-28.json

A record is rerun when its command is an ``openqa eval`` line, its method needs no model or index
this machine lacks (an LLM, a trained reader, a dense, hybrid or Lucene index not built under
``OPENQA_INDEXES``) and its own recorded seconds are at most ``--max-seconds``. Its command is run as
recorded, with ``--output`` a scratch folder (a ``--predictions`` file it names that has moved since
is found under eval/results/ by its name). The reruns stay in the scratch folder, so a second call
with the same folder reuses them (``--fresh`` reruns). ``--mark`` then writes the outcome into each
committed record whose figures moved, or that could not be rerun though the settings it names as
shipped changed since it was made: a ``stale`` field (what changed, the figures now where a rerun
measured them, why it was not rerun, the report), its figures left as they were made.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import REPO, RESULTS, record_path, write_record

#: Figures of an eval record compared with its rerun (a dotted path into the record).
FIGURES = ("n", "correct", "accuracy", "confidence.ece", "versus_best_part.difference", "versus_best_part.ci95",
           "versus_baseline.difference", "versus_baseline.ci95")
#: Methods no rerun here can make in minutes, and why.
SLOW_METHODS = {"llm": "an LLM run: a GGUF model and hours of 2 cores", "reader": "a trained reader: its model folder is not committed"}
#: The index folders (``<lang>-<engine>``) an index engine of a record needs.
ENGINE_FOLDERS = {"hybrid": ("custom", "dense")}
#: Where the settings a record names as shipped are kept.
SHIPPED = "shipped with openqa: "


def figure(record: dict[str, Any], path: str) -> Any:
    """The figure at the dotted ``path`` of ``record`` (None where it has none)."""
    value: Any = record
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Every entry (a dotted key) both records hold in which ``new`` differs from ``old``, with both
    values; numbers equal to 6 significant digits do not differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [line for key in old if key in new for line in differences(old[key], new[key], f"{where}.{key}".lstrip("."))]
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (old, new))
    if numbers and math.isclose(old, new, rel_tol=1e-6):
        return []
    return [] if old == new else [f"{where}: {json.dumps(old, ensure_ascii=False)} -> {json.dumps(new, ensure_ascii=False)}"]


def named_settings(settings: Any, where: str = "settings") -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """Each setting a record's ``settings`` say came from a shipped file (its ``sources`` entry
    ``shipped with openqa: openqa/tuned/FILE``), at any depth (an ensemble's or a hybrid's parts):
    where it is, the settings holding it, its key and the file."""
    if not isinstance(settings, dict):
        return
    for key, source in (settings.get("sources") or {}).items():
        if isinstance(source, str) and source.startswith(SHIPPED):
            yield where, settings, key, source.removeprefix(SHIPPED).split(" ")[0]
    for key, value in settings.items():
        if key != "sources":
            yield from named_settings(value, f"{where}.{key}")


def calibration_words(calibration: Any) -> str | None:
    """How a record's settings name a shipped calibration (``temperature T over SCALE scores``, the
    start of ``Calibration.describe``), from the calibration file's own fields; None without them."""
    if not isinstance(calibration, dict) or not isinstance(calibration.get("temperature"), (int, float)):
        return None
    return f"temperature {calibration['temperature']:.3g} over {calibration.get('scale')} scores"


def settings_changed(record: dict[str, Any]) -> list[str]:
    """The settings the record names as shipped that the shipped files now set otherwise: a setting
    chosen on dev (the file's ``chosen``, for a run of the query mode chosen) or the probabilities'
    temperature and scale (its ``calibration``), each as recorded and now. Empty for a record made
    with the settings that ship."""
    changed = []
    for where, settings, key, file in named_settings(record.get("settings", {})):
        try:
            shipped = json.loads((REPO / file).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            changed.append(f"{where}.{key}: {file} is no longer shipped")
            continue
        recorded = settings.get(key)
        if key == "probabilities":
            now = calibration_words(shipped.get("calibration"))
            if isinstance(recorded, str) and now is not None and recorded.split(", fitted")[0] != now.split(", fitted")[0]:
                changed.append(f"{where}.probabilities: {recorded.split(', fitted')[0]} -> {now.split(', fitted')[0]} ({file})")
            continue
        chosen = shipped.get("chosen", {})
        if key not in chosen or settings.get("query", chosen.get("query")) != chosen.get("query"):
            continue  # a run with another query mode than the one chosen reads the file's grid, not its choice
        now = chosen[key]
        if isinstance(recorded, dict) and isinstance(now, list):  # an ensemble's weights: by part, as the file lists its parts
            recorded = list(recorded.values())
        if differences({key: recorded}, {key: now}):
            changed.append(f"{where}.{key}: {json.dumps(recorded)} -> {json.dumps(now)} ({file})")
    return changed


def why_skipped(record: dict[str, Any], max_seconds: float, indexes: Path) -> str | None:
    """Why the record is not rerun here, or None when it is."""
    command = str(record.get("command", ""))
    if not command.startswith("openqa eval "):
        return f"made by {command.split(' ')[:2]}, not an openqa eval command"
    if record.get("method") in SLOW_METHODS:
        return SLOW_METHODS[record["method"]]
    if not isinstance(record.get("accuracy"), (int, float)):
        return "no accuracy to compare (not an accuracy run)"
    engine = str(figure(record, "index.engine") or "")
    lang = str(record.get("corpus", "")).split(":")[0]
    missing = [f"{lang}-{e}" for e in ENGINE_FOLDERS.get(engine, (engine,)) if engine and not (indexes / f"{lang}-{e}").is_dir()]
    if missing:
        return f"needs the {', '.join(missing)} index, not built under {indexes.name}/ (a dense index: 10-17 min on 2 cores and the encoder model)"
    seconds = record.get("seconds")
    if not isinstance(seconds, (int, float)) or seconds > max_seconds:
        return f"recorded {seconds} s, over --max-seconds {max_seconds:g}"
    return None


def rerun_command(record: dict[str, Any], scratch: Path) -> tuple[list[str], list[str]]:
    """The record's command as this rerun runs it (its ``--output`` the scratch folder, no ``--json``;
    a ``--predictions PART=FILE`` moved since found under eval/results/ by name), and what it changed."""
    args, notes = shlex.split(str(record["command"]))[2:], []
    kept: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--output":
            skip = True
            continue
        if arg == "--json":
            continue
        if i and args[i - 1] == "--predictions" and "=" in arg:
            part, file = arg.split("=", 1)
            if not (REPO / file).exists():
                found = sorted(RESULTS.rglob(Path(file).name))
                if found:
                    arg = f"{part}={found[0].relative_to(REPO)}"
                    notes.append(f"{file} is now {found[0].relative_to(REPO)}")
        kept.append(arg)
    return ["eval", *kept, "--output", str(scratch)], notes


def rerun(path: Path, record: dict[str, Any], scratch: Path, fresh: bool) -> dict[str, Any]:
    """Rerun one record into ``scratch`` (reusing a rerun already there unless ``fresh``: the row gives
    the rerun's own date and commit) and compare."""
    folder = scratch / path.parent.relative_to(RESULTS)
    args, notes = rerun_command(record, folder)
    made = folder / path.name
    started = time.monotonic()
    if fresh or not made.is_file():
        done = subprocess.run([sys.executable, "-m", "openqa.cli", *args], cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            return {"record": str(path.relative_to(RESULTS)), "failed": (done.stderr.strip().splitlines() or ["no message"])[-1],
                    "rerun": shlex.join(["openqa", *args])}
    new = json.loads(made.read_text(encoding="utf-8"))
    moved = [{"figure": name, "recorded": figure(record, name), "now": figure(new, name)} for name in FIGURES
             if figure(record, name) is not None and figure(record, name) != figure(new, name)]
    return {"record": str(path.relative_to(RESULTS)), "method": record.get("method"), "recorded_seconds": record.get("seconds"),
            "seconds": round(time.monotonic() - started, 1), "rerun_date": new.get("date"), "rerun_commit": new.get("commit"),
            "moved": moved,
            "settings_differ": differences(record.get("settings", {}), new.get("settings", {}))[:10],
            "index_differs": differences({k: v for k, v in (record.get("index") or {}).items() if k != "built_at"},
                                         new.get("index") or {})[:5],
            **({"notes": notes} if notes else {}), "rerun": shlex.join(["openqa", *args])}


def mark(path: Path, stale: dict[str, Any] | None) -> None:
    """Write (or, where nothing is stale, remove) the committed record's ``stale`` field, nothing else."""
    record = json.loads(path.read_text(encoding="utf-8"))
    if stale is None and "stale" not in record:
        return
    record.pop("stale", None)
    if stale is not None:
        record["stale"] = stale
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="the report's name: eval/results/studies/rerun-records-NAME.json")
    parser.add_argument("--max-seconds", type=float, default=300, help="rerun records whose recorded seconds are at most this")
    parser.add_argument("--only", default="", help="only records whose path under eval/results/ contains this")
    parser.add_argument("--limit", type=int, default=None, help="rerun at most this many records (the first, by path)")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/openqa-rerun-records"), help="where the reruns are written")
    parser.add_argument("--fresh", action="store_true", help="rerun even where a rerun is in the scratch folder")
    parser.add_argument("--mark", action="store_true", help="write a stale field into each committed record found stale")
    args = parser.parse_args()
    indexes = Path(os.environ.get("OPENQA_INDEXES", REPO / "indexes"))
    name = f"rerun-records-{args.name}.json"
    report_path = str(record_path(name).relative_to(REPO))
    checked, skipped, failed = [], [], []
    for path in sorted(RESULTS.glob("runs/*/*.json")):
        if args.only not in str(path.relative_to(RESULTS)):
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or "dataset" not in record:
            continue
        changed = settings_changed(record)
        reason = why_skipped(record, args.max_seconds, indexes)
        if reason is None and args.limit is not None and len(checked) + len(failed) >= args.limit:
            reason = f"past --limit {args.limit}"
        if reason is not None:
            skipped.append({"record": str(path.relative_to(RESULTS)), "why": reason, **({"settings_changed": changed} if changed else {})})
            if args.mark and not reason.startswith("past --limit"):
                mark(path, {"because": changed, "now": None, "not_rerun": reason, "report": report_path} if changed else None)
            continue
        print(f"rerunning {path.relative_to(RESULTS)} (recorded {record.get('seconds')} s)", flush=True)
        row = {**rerun(path, record, args.scratch, args.fresh), **({"settings_changed": changed} if changed else {})}
        (failed if "failed" in row else checked).append(row)
        if args.mark and "failed" not in row:
            because = changed + row["settings_differ"] + row["index_differs"] or [
                f"the same settings and index: openqa's code changed since it was made "
                f"({record.get('commit') or 'no commit recorded'}, {record.get('date')})"]
            mark(path, {"because": because, "now": {m["figure"]: m["now"] for m in row["moved"]},
                        "not_rerun": None, "report": report_path} if row["moved"] else None)
    moved = [row for row in checked if row["moved"]]
    command = "python scripts/maintenance/rerun_records.py " + shlex.join(sys.argv[1:])
    report = {"method": "rerun of the committed eval records", "max_seconds": args.max_seconds,
              "data": os.environ.get("OPENQA_DATA", ""), "indexes": str(indexes),
              "counts": {"checked": len(checked), "moved": len(moved), "failed": len(failed), "skipped": len(skipped),
                         "figures_moved": sum(len(row["moved"]) for row in moved)},
              "moved": [row["record"] for row in moved], "checked": checked, "failed": failed, "skipped": skipped}
    out = write_record(name, report, command)
    print(f"{len(checked)} records rerun, {len(moved)} moved, {len(failed)} failed, {len(skipped)} skipped; wrote {out}")


if __name__ == "__main__":
    main()
