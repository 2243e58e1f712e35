"""``scripts/maintenance/get_model.py`` refuses an output it cannot write before downloading 1.1 GB,
in one line, and leaves nothing behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "maintenance" / "get_model.py"


def run(output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--output", str(output)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("where, message", [
    ("missing/model.gguf", "does not exist: create it first"),
    (".", "is a folder: give a file name"),
])
def test_an_output_that_cannot_be_written_is_refused_before_downloading(tmp_path, where, message):
    done = run(tmp_path / where)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.part"))

