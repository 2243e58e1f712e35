"""The committed records (eval/results, the shipped settings) name no folder of the machine that
made them: a command anyone can rerun names files and folders relatively, or as FOLDER."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
#: The start of an absolute path of a machine (a home, a scratch or a work folder).
MACHINE_PATH = re.compile(r"(?<![\w:/.])/(?:work|home|tmp|root|Users|mnt|opt|var|private)/")


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_no_committed_record_names_a_folder_of_its_machine():
    records = sorted((ROOT / "eval" / "results").rglob("*.json")) + sorted((ROOT / "openqa" / "tuned").glob("*.json"))
    assert records
    found = {str(p.relative_to(ROOT)): s for p in records for s in strings(json.loads(p.read_text())) if MACHINE_PATH.search(s)}
    assert not found, found
    notes = sorted((ROOT / "eval" / "results").rglob("*.md"))
    assert not [str(p.relative_to(ROOT)) for p in notes if MACHINE_PATH.search(p.read_text())]
