"""The package's layers (``docs/layout.md``): every module imports only its own layer or those
under it, wherever the import stands (at the top, in a function, under ``TYPE_CHECKING``), and the
imports run when modules load form no circle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "openqa"

#: Each module's floor, by the longest prefix of its dotted name (as docs/layout.md lists them).
LAYERS: dict[str, int] = {
    "openqa.cli": 6, "openqa.serve": 6,
    "openqa.api": 5, "openqa.pipeline": 5, "openqa.training": 5,
    "openqa.methods": 4, "openqa.workspace": 4, "openqa.evaluate": 4, "openqa.tuning": 4, "openqa.answer": 4,
    "openqa.retrieval_report": 4,
    "openqa.llm": 3, "openqa.scorers": 3, "openqa.readers": 3,
    "openqa.retrieval": 2, "openqa.data": 2, "openqa.corpus": 2,
    "openqa.languages": 1, "openqa.text": 1, "openqa.config": 1, "openqa.errors": 1, "openqa.extras": 1,
    "openqa.progress": 1, "openqa.arguments": 1, "openqa.cancel": 1, "openqa.jsonl": 1, "openqa.limits": 1,
    "openqa.signals": 1, "openqa.version": 1,
    "openqa.terminal": 6, "openqa.llm.method": 4,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(name: str) -> int | None:
    """The floor of module ``name`` (None: the package root, which imports the API lazily)."""
    if name == "openqa":
        return None
    best = max((prefix for prefix in LAYERS if name == prefix or name.startswith(prefix + ".")), key=len, default=None)
    assert best is not None, f"{name} is on no floor: add it to LAYERS and docs/layout.md"
    return LAYERS[best]


def imports(path: Path, name: str) -> list[tuple[str, int, bool]]:
    """(imported openqa module, line, whether it runs when the module loads) for each import of ``path``."""
    tree = ast.parse(path.read_text())
    loading: set[int] = set()  # ids of import nodes at module level outside ``if TYPE_CHECKING``
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            loading.add(id(node))
        elif isinstance(node, ast.Try):
            loading.update(id(n) for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    found = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # ``from openqa.x import y``: y may be a module of x
            targets = [f"{base}.{alias.name}" if (PACKAGE.parent / f"{base}.{alias.name}".replace(".", "/")).with_suffix(".py").exists()
                       or (PACKAGE.parent / f"{base}.{alias.name}".replace(".", "/")).is_dir() else base for alias in node.names]
        else:
            continue
        found += [(t, node.lineno, id(node) in loading) for t in targets if t == "openqa" or t.startswith("openqa.")]
    return found


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_import_goes_down_or_stays_on_its_floor():
    wrong = []
    for name, path in modules().items():
        own = layer(name)
        for target, line, _ in imports(path, name):
            floor = layer(target)
            if own is not None and floor is not None and floor > own:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name} (floor {own}) imports {target} (floor {floor})")
    assert not wrong, "\n".join(wrong)


def test_imports_at_load_form_no_circle():
    found = modules()
    graph = {name: {t for t, _, loads in imports(path, name) if loads and t in found and t != name}
             for name, path in found.items()}
    # a package's __init__ is loaded before its modules: importing a module of one's own package is not a circle through it
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if node.startswith(nxt + ".") or nxt.startswith(node + "."):
                continue  # a package and its own modules
            if state.get(nxt) == 1:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "\n".join(circles)


def test_the_layer_table_names_only_modules_that_exist():
    names = set(modules())
    assert all(any(n == prefix or n.startswith(prefix + ".") for n in names) for prefix in LAYERS)
