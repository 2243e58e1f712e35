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
from faultsuite.synthetic import make_data
from faultsuite.tally import OPENQA, Figures, Outcome, run_case
from faultsuite.typed import typed_cases


def run_suite(quick: bool = False, engines: list[str] | None = None, tries: int | None = None, seed: int = 11) -> dict[str, Any]:
    """Run the hostile cases, the typed scenarios and the interruptions; return the record."""
    rng = random.Random(seed)
    figures = Figures()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="openqa-faults-") as tmp:
        root = Path(tmp)
        data = make_data(root, paragraphs=800 if quick else 8000, questions=40 if quick else 400)
        index_dir = root / "indexes"
        for engine in ("custom", "pmi"):
            subprocess.run([OPENQA, "index", "--lang", "en", "--engine", engine, "--data-dir", str(data),
                            "--index-dir", str(index_dir)], check=True, capture_output=True)
        with tiny_disk(root / "tiny") as tiny:
            for case in hostile_cases(root, data, index_dir, quick, tiny):
                outcome = run_case(case, root)
                outcomes.append(outcome)
                print(f"{outcome.verdict:<12} {outcome.seconds:5.1f} s  {case.category}: {case.name}", file=sys.stderr)
        for holder in HOLDERS:
            holder.wait()
        for outcome in typed_cases(["--data-dir", str(data), "--index-dir", str(index_dir)], root, quick, QUICK_PER_CATEGORY):
            outcomes.append(outcome)
            print(f"{outcome.verdict:<12} {outcome.seconds:5.1f} s  {outcome.category}: {outcome.name}", file=sys.stderr)
        for outcome in outcomes:
            figures.answered_case(outcome)
        chosen = engines or (["custom"] if quick else list(ENGINE_TRIES))
        for engine in chosen:
            print(f"interrupting {engine} index builds", file=sys.stderr)
            interrupt_builds(engine, tries or (2 if quick else ENGINE_TRIES[engine]), root, data, figures, rng)
        interrupt_evals(tries or (2 if quick else 10), root, data, figures, rng)
        interrupt_tunes(tries or (2 if quick else 10), root, data, figures, rng)
    return {
        "dataset": "synthetic corpus (seeded) and hostile inputs", "split": "faults", "method": "openqa console script",
        "n": figures.cases + figures.interruptions,
        "accuracy": round(100 * (figures.clean_errors + figures.answered + figures.clean_stops)
                          / max(1, figures.cases + figures.interruptions), 2),
        "accuracy_means": "share of cases and interruptions that ended cleanly (clean error, right answer, clean stop)",
        "engines_interrupted": chosen, "quick": quick, "seed": seed, "full_disk": tiny is not None,
        **asdict(figures),
        "categories": sorted({o.category for o in outcomes}),
        "cases_by_category": {c: sum(o.category == c for o in outcomes) for c in sorted({o.category for o in outcomes})},
    }
