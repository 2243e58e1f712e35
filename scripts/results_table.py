"""Render the accuracy table of RESULTS.md from the JSON summaries under eval/results/.

    python scripts/results_table.py > eval/results/TABLE.md
"""

from __future__ import annotations

import json
from pathlib import Path


def main() -> None:
    rows = []
    for path in sorted(Path("eval/results").glob("*.json")):
        s = json.loads(path.read_text())
        if "accuracy" not in s or "ci95" not in s or s.get("limit"):
            continue
        settings = s.get("settings", {})
        rows.append(
            f"| {s['dataset']} | {s['split']} | {s['method']}{' (' + s['variant'] + ')' if s.get('variant') else ''} "
            f"| {s['n']} | **{s['accuracy']:.2f}** | {s['ci95'][0]:.2f}-{s['ci95'][1]:.2f} "
            f"| {s['ties']['tie_rate']:.1f}% | {s['ties']['expected_accuracy_random_ties']:.2f} "
            f"| top-{settings.get('top_n')} {settings.get('aggregate')}, query {settings.get('query')} "
            f"| {s['seconds']:.1f} | `{s['command']}` |"
        )
    print("| dataset | split | method | n | accuracy % | 95% CI | tied best | acc. if ties random | settings (dev-tuned) | s | command |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
