"""``scripts/maintenance/get_model.py`` refuses an output it cannot write before downloading 1.1 GB,
in one line, and leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "maintenance" / "get_model.py"


def run(output: Path) -> subprocess.CompletedProcess[str]:
    """The script with pip kept off the network: were it to download, pip would find nothing in an empty folder."""
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(output.parent.parent / "no-wheels")}
    return subprocess.run([sys.executable, str(SCRIPT), "--output", str(output)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **offline})


@pytest.mark.parametrize("where, message", [
    ("missing/model.gguf", "does not exist: create it first"),
    (".", "is a folder: give a file name"),
])
def test_an_output_that_cannot_be_written_is_refused_before_downloading(tmp_path, where, message):
    done = run(tmp_path / where)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.part"))



@pytest.mark.parametrize("make", [lambda path: os.mkfifo(path), lambda path: path.symlink_to(path.parent / "elsewhere")])
def test_a_fifo_or_link_at_the_output_is_refused_before_downloading(tmp_path, make):
    """Its name used to be replaced by the assembled file (a device such as /dev/null too, as root)."""
    output = tmp_path / "model.gguf"
    make(output)
    done = run(output)
    assert done.returncode == 1 and "is there and is not a plain file" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not list(tmp_path.rglob("*.part"))
