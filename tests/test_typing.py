"""``mypy --strict`` accepts openqa itself and a user's script that imports and uses every public
name of openqa (``py.typed`` ships, so users' type checkers read openqa's hints)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("typing") / "user_script.py"
#: The repository's mypy settings (the overrides for untyped libraries), read whatever folder the suite starts in.
CONFIG = Path(__file__).parents[1] / "pyproject.toml"


@pytest.mark.spawns
def test_mypy_strict_accepts_the_package_and_a_script_using_every_public_name(tmp_path):
    import openqa

    used = SCRIPT.read_text()
    assert all(name in used for name in openqa.__all__)  # the script does use every public name
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         "--config-file", str(CONFIG), "--no-error-summary", str(Path(openqa.__file__).parent), str(SCRIPT)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
