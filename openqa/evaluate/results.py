"""The files an evaluation leaves: a JSON summary, per-question predictions and a Markdown report,
written so that an interruption never leaves one half-written; and the provenance every record
carries (command, date, machine, peak memory)."""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any


def run_record(command: str | None = None) -> dict[str, Any]:
    """How a result was produced: the command, time, machine and peak memory."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "command": command or " ".join(["openqa", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "peak_memory_mb": round(peak_kb / 1024, 1),
    }


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that an interruption never leaves it half-written."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_results(summary: dict[str, Any], rows: list[dict[str, Any]], out_dir: Path) -> Path:
    """Write ``<stem>.json`` (summary), ``<stem>.predictions.jsonl`` and ``<stem>.md``; return the JSON path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{summary['dataset']}-{summary['split']}-{summary['method']}"
    if summary.get("variant"):
        stem += f"-{summary['variant']}"
    if summary.get("limit"):
        stem += f"-limit{summary['limit']}"
    write_atomic(out_dir / f"{stem}.predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    lo, hi = summary["ci95"]
    report = (
        f"# {summary['method']} on {summary['dataset']} {summary['split']}\n\n"
        f"| n | correct | accuracy | 95% CI | tied best | seconds |\n|---|---|---|---|---|---|\n"
        f"| {summary['n']} | {summary['correct']} | {summary['accuracy']:.2f} | {lo:.2f}-{hi:.2f} "
        f"| {summary['ties']['tie_rate']:.2f}% | {summary['seconds']:.2f} |\n\n"
        f"Command: `{summary['command']}`  \nDate: {summary['date']}  \n"
        f"Settings: `{json.dumps(summary.get('settings', {}))}`  \nCorpus: {summary.get('corpus', '')}\n"
    )
    write_atomic(out_dir / f"{stem}.md", report)
    path = out_dir / f"{stem}.json"
    write_atomic(path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return path
