"""The repository's scripts use openqa's public API only: every ``openqa`` name a script under
``scripts/`` imports (anywhere in it, functions included) is one of ``openqa.__all__`` imported from
``openqa`` itself, never a name starting with ``_`` and never a module of the package
(``from openqa.x import y`` / ``import openqa.x``). A script that needs more asks the API for it (a
small, typed, documented addition to ``openqa.__all__``) rather than reaching into the package.

TODO: the scripts in ``REACHING_IN`` still import the internals they list (the server's limits,
the method registry inside the fault suite). The list may only shrink: a script that reaches in
further, or a new script that reaches in at all, fails, and so does an entry that is no longer
needed (remove it). Moving one of them to the public API: add what it needs to ``openqa.__all__``
(re-exports of stable concepts first), then drop its entry here.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import openqa

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

#: Scripts that still import openqa internals, and which (``module.name``): the list to empty.
REACHING_IN: dict[str, set[str]] = {
    "scripts/benchmarks/faultsuite/interruptions.py": {'openqa.config.Settings', 'openqa.evaluate.results.read_result_set', 'openqa.methods.Request', 'openqa.methods.open_method', 'openqa.retrieval.registry.open_index', 'openqa.workspace.Context', 'openqa.workspace.Exam'},
}


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
    new = {name: sorted(used - REACHING_IN.get(name, set())) for name, used in scripts.items() if used - REACHING_IN.get(name, set())}
    assert not new, f"scripts import openqa names outside openqa.__all__ (use the public API, or add to it): {new}"
    stale = {name: sorted(listed - scripts.get(name, set())) for name, listed in REACHING_IN.items() if listed - scripts.get(name, set())}
    assert not stale, f"REACHING_IN lists imports the scripts no longer make: remove them: {stale}"


def test_the_public_names_scripts_use_exist():
    for name in openqa.__all__:  # a name that is also a module of the package would give the module
        assert getattr(openqa, name) is not None and not isinstance(getattr(openqa, name), types.ModuleType), name
