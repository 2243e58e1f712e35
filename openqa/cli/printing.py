"""What the commands print: notes, JSON lines, a run's settings and how far to trust its answers."""

from __future__ import annotations

import codecs
import json
import sys
from typing import Any

from openqa.text.unicode import printable


def note(message: str) -> None:
    """A note for the person at the terminal (on standard error: standard output stays the command's result)."""
    print(f"openqa: {printable(message)}", file=sys.stderr)


def print_json(record: dict[str, Any]) -> None:
    """One JSON line on standard output: other alphabets as they are where it takes UTF-8, else
    (``PYTHONIOENCODING=ascii``, a C locale) as ``\\u`` escapes, still valid JSON."""
    utf8 = codecs.lookup(getattr(sys.stdout, "encoding", None) or "ascii").name == "utf-8"
    print(json.dumps(record, ensure_ascii=not utf8))


def settings_line(settings: dict[str, Any]) -> str:
    """One line: every setting's value, grouped by where it came from."""
    groups: dict[str, list[str]] = {}
    for key, source in settings["sources"].items():
        value = settings[key]
        groups.setdefault(source, []).append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    return "settings: " + "; ".join(f"{', '.join(items)} ({source})" for source, items in groups.items())


def confidence_lines(summary: dict[str, Any]) -> list[str]:
    """How well the run's probabilities rank its answers, and an ensemble against its best part."""
    c = summary.get("confidence")
    if not c:
        return []
    at = c["accuracy_at_coverage"]
    floor = c.get("ece_if_calibrated")  # what sampling noise alone gives on as many questions
    noise = f" (a calibrated method: {floor['median']:.3f}, 95% {floor['ci95'][0]:.3f}-{floor['ci95'][1]:.3f})" if floor else ""
    lines = [f"confidence: ECE {c['ece']:.3f} (10 bins){noise}, Brier {c['brier']:.3f}, AURC {c['aurc']:.3f}; accuracy of the most "
             "confident " + ", ".join(f"{k}%: {v['accuracy']:.1f}" for k, v in at.items() if k != "100")]
    versus = summary.get("versus_best_part")
    if versus:
        lo, hi = versus["ci95"]
        lines.append(f"against its best part on dev, {versus['part']}: {versus['difference']:+.2f} points (95% CI {lo:+.2f} to {hi:+.2f})")
    base = summary.get("versus_baseline")
    if base:
        lo, hi = base["ci95"]
        lines.append(f"against {base['method']} ({base['accuracy']:.2f}%): {base['difference']:+.2f} points (95% CI {lo:+.2f} to {hi:+.2f})")
    return lines
