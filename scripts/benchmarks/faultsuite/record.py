"""The fault suite end to end: a synthetic site, every hostile case, the typed scenarios and the
interruptions, counted into the record that bench_faults.py writes."""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faultsuite.cases import HOLDERS, QUICK_PER_CATEGORY, hostile_cases, tiny_disk
from faultsuite.interruptions import ENGINE_TRIES, interrupt_builds, interrupt_evals, interrupt_tunes
from faultsuite.leaks import release_holders
from faultsuite.synthetic import make_data
from faultsuite.tally import OPENQA, Figures, Outcome, run_case
from faultsuite.typed import typed_cases

#: The parts of the suite, each runnable alone (``bench_faults.py --part``) and merged after (``merge``).
PARTS = ("cases", "builds", "runs")


def run_suite(quick: bool = False, engines: list[str] | None = None, tries: int | None = None, seed: int = 11,
              parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """Run the parts asked for: the hostile cases and the typed scenarios (``cases``), the interrupted
    index builds (``builds``), the interrupted evaluations and tunes (``runs``); return the record."""
    rng = random.Random(seed)
    figures = Figures()
    outcomes: list[Outcome] = []
    chosen: list[str] = []
    full_disk = False
    with tempfile.TemporaryDirectory(prefix="openqa-faults-") as tmp:
        root = Path(tmp)
        data = make_data(root, paragraphs=800 if quick else 8000, questions=40 if quick else 400)
        index_dir = root / "indexes"
        for engine in ("custom", "pmi"):
            subprocess.run([OPENQA, "index", "--lang", "en", "--engine", engine, "--data-dir", str(data),
                            "--index-dir", str(index_dir)], check=True, capture_output=True)
        if "cases" in parts:
            with tiny_disk(root / "tiny") as tiny:
                full_disk = tiny is not None
                for case in hostile_cases(root, data, index_dir, quick, tiny):
                    outcome = run_case(case, root)
                    outcomes.append(outcome)
                    print(f"{outcome.verdict:<12} {outcome.seconds:5.1f} s  {case.category}: {case.name}", file=sys.stderr)
            for holder in HOLDERS:
                holder.wait()
            release_holders()
            for outcome in typed_cases(["--data-dir", str(data), "--index-dir", str(index_dir)], root, quick, QUICK_PER_CATEGORY):
                outcomes.append(outcome)
                print(f"{outcome.verdict:<12} {outcome.seconds:5.1f} s  {outcome.category}: {outcome.name}", file=sys.stderr)
            for outcome in outcomes:
                figures.answered_case(outcome)
        if "builds" in parts:
            chosen = engines or (["custom"] if quick else list(ENGINE_TRIES))
            for engine in chosen:
                print(f"interrupting {engine} index builds", file=sys.stderr)
                interrupt_builds(engine, tries or (2 if quick else ENGINE_TRIES[engine]), root, data, figures, rng)
        if "runs" in parts:
            interrupt_evals(tries or (2 if quick else 10), root, data, figures, rng)
            interrupt_tunes(tries or (2 if quick else 10), root, data, figures, rng)
    return summary(figures, {
        "parts": list(parts), "engines_interrupted": chosen, "quick": quick, "seed": seed, "full_disk": full_disk,
        "categories": sorted({o.category for o in outcomes}),
        "cases_by_category": {c: sum(o.category == c for o in outcomes) for c in sorted({o.category for o in outcomes})},
    })


def summary(figures: Figures, extra: dict[str, Any]) -> dict[str, Any]:
    """The record of ``figures`` (with ``extra``: what was run)."""
    return {
        "dataset": "synthetic corpus (seeded) and hostile inputs", "split": "faults", "method": "openqa console script",
        "n": figures.cases + figures.interruptions,
        "accuracy": round(100 * (figures.clean_errors + figures.answered + figures.clean_stops)
                          / max(1, figures.cases + figures.interruptions), 2),
        "accuracy_means": "share of cases and interruptions that ended cleanly (clean error, right answer, clean stop)",
        **extra, **asdict(figures),
    }


def merge(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record of the parts' records (each run alone, ``bench_faults.py --part``): their figures
    added up, their categories and engines together, and each part's command, date and seconds."""
    figures = Figures()
    for record in records:
        for name in asdict(Figures()):
            setattr(figures, name, getattr(figures, name) + record[name])  # ints added, failures joined
    by_category: dict[str, int] = {}
    for record in records:
        for category, count in record["cases_by_category"].items():
            by_category[category] = by_category.get(category, 0) + count
    return summary(figures, {
        "parts": [part for record in records for part in record["parts"]],
        "engines_interrupted": [engine for record in records for engine in record["engines_interrupted"]],
        "quick": any(record["quick"] for record in records), "seed": records[0]["seed"],
        "full_disk": any(record["full_disk"] for record in records),
        "categories": sorted(by_category), "cases_by_category": dict(sorted(by_category.items())),
        "seconds": round(sum(record["seconds"] for record in records), 1),
        "part_runs": [{key: record.get(key) for key in ("parts", "command", "date", "seconds", "commit", "peak_memory_mb")}
                      for record in records],
    })
