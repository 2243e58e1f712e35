"""The repository's scripts use openqa's public API only: every ``openqa`` name a script under
``scripts/`` imports (anywhere in it, functions included) is one of ``openqa.__all__`` imported from
``openqa`` itself, never a name starting with ``_`` and never a module of the package
(``from openqa.x import y`` / ``import openqa.x``). A script that needs more asks the API for it (a
small, typed, documented addition to ``openqa.__all__``) rather than reaching into the package.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import openqa

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

def reaching_in(path: Path) -> set[str]:
    """The ``openqa`` names ``path`` imports that are not public: ``module.name`` for each."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("openqa.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "openqa":
            for alias in node.names:
                if node.module != "openqa" or alias.name.startswith("_") or alias.name not in openqa.__all__:
                    found.add(f"{node.module}.{alias.name}")
    return found


def test_the_check_sees_what_reaches_in(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import openqa\nimport openqa.api\nfrom openqa import Solver, _EXPORTS, nope\n"
                      "def f():\n    from openqa.data import load_questions\n")
    assert reaching_in(script) == {"openqa.api", "openqa._EXPORTS", "openqa.nope", "openqa.data.load_questions"}


def test_scripts_use_only_the_public_api():
    scripts = {path.relative_to(ROOT).as_posix(): reaching_in(path) for path in sorted(SCRIPTS.rglob("*.py"))}
    assert scripts, "no scripts found"
    reaching = {name: sorted(used) for name, used in scripts.items() if used}
    assert not reaching, f"scripts import openqa names outside openqa.__all__ (use the public API, or add to it): {reaching}"


def test_the_public_names_scripts_use_exist():
    for name in openqa.__all__:  # a name that is also a module of the package would give the module
        assert getattr(openqa, name) is not None and not isinstance(getattr(openqa, name), types.ModuleType), name
