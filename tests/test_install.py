"""The light install: the wheel built from this tree, installed with the core only (no extras) into a
fresh virtual environment, runs index, answer, eval and the README's Python example on a tiny
corpus; what an extra brings is refused there in one line naming the extra."""

from __future__ import annotations

import json
import zipfile

import pytest

import openqa
from tests.helpers import QUESTIONS, make_data_dir
from tests.install_helpers import HEAVY, build_wheel, fresh_env, run_readme, sh


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


@pytest.mark.spawns
def test_the_wheel_carries_settings_templates_pages_and_type_hints(core):
    _, wheel = core
    names = zipfile.ZipFile(wheel).namelist()
    for wanted in ("openqa/tuned/ir-custom-us.json", "openqa/serve/static/index.html", "openqa/llm/templates/user.v1.txt",
                   "openqa/py.typed"):
        assert wanted in names, wanted
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Name: openqa-medqa" in text and "Provides-Extra: dense" in text and "Provides-Extra: all" in text


@pytest.mark.spawns
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
    helped = sh(bin_dir / "openqa", "--help", cwd=root)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: openqa")
    version = sh(bin_dir / "openqa", "--version", cwd=root)
    assert version.returncode == 0 and version.stdout.strip() == f"openqa {openqa.__version__}"
    readme = run_readme(str(bin_dir / "python"), root, data)
    assert readme.returncode == 0, readme.stderr
    assert readme.stdout.splitlines()[0].startswith("B {'B': ")
