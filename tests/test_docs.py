"""The documentation and the house: the MkDocs site builds with ``--strict`` (a broken link, a
missing page or an API reference to a name that no longer exists fails), the figures RESULTS.md and
the README's table give are those the records under eval/results/ make, the README stays short and
names exactly the commands CI runs, and no module of ``openqa`` imports, however lazily, a module
that imports it back."""

from __future__ import annotations

import ast
import contextlib
import html
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "openqa"


def docs_hooks():
    """``docs/hooks.py``, the module MkDocs runs while it builds the site."""
    spec = importlib.util.spec_from_file_location("openqa_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def printed_help(words: tuple[str, ...]) -> str:
    """What ``openqa WORDS --help`` prints, run in this process."""
    from openqa.cli import build_parser

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        build_parser().parse_args([*words, "--help"])
    assert stop.value.code == 0
    return out.getvalue()


def every_command() -> list[tuple[str, ...]]:
    from openqa.cli import build_parser

    return [words for words, _ in docs_hooks().commands(build_parser())]


def test_the_command_reference_is_what_help_prints(monkeypatch):
    """docs/cli.md shows, for ``openqa`` and each of its commands (nested ones too), exactly what
    ``openqa COMMAND --help`` prints in a terminal as wide as the page's (registries' listings filled in)."""
    hooks = docs_hooks()
    monkeypatch.setenv("COLUMNS", str(hooks.HELP_COLUMNS))
    page = hooks.on_page_markdown((ROOT / "docs" / "cli.md").read_text(encoding="utf-8"), None, None, None)
    blocks = re.findall(r"^```text\n(.*?)^```$", page, flags=re.S | re.M)
    words = every_command()
    assert ("corpus", "stats") in words and ("search",) in words
    assert len(blocks) == len(words), "one block of help per command"
    for command, block in zip(words, blocks):
        printed = printed_help(command)
        assert block == printed, f"the reference's `openqa {' '.join(command)}` differs from its --help"
        assert not re.search(r"\{(engines|methods|own_engines)\}|%%", printed), f"openqa {' '.join(command)} --help"
        if command:
            assert f"openqa {' '.join(command)}\n" in page  # its heading


@pytest.mark.spawns
def test_the_site_builds_strictly(tmp_path, monkeypatch):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    reference = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "openqa search" in reference and "--predictions" in reference  # generated from the parser
    shown = [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in re.findall(r"<pre\b.*?</pre>", reference, flags=re.S)]
    monkeypatch.setenv("COLUMNS", str(docs_hooks().HELP_COLUMNS))
    for words in every_command():  # the built page holds each command's help as argparse formats it, as wide as the page's
        assert printed_help(words).rstrip("\n") in [block.rstrip("\n") for block in shown], f"openqa {' '.join(words)} --help"
    api = (tmp_path / "site" / "reference" / "index.html").read_text()
    assert "batch_search" in api  # from the docstrings
    for name, path in api_directives().items():  # each public name under its heading, with its signature
        entry = re.search(rf'<h3 id="{re.escape(path)}".*?</h3>\s*(<div class="doc-signature.*?</pre>)?', api, flags=re.S)
        assert entry, f"the API reference has no heading for {name} ({path})"
        if exception_without_own_init(getattr(importlib.import_module("openqa"), name)):
            continue  # it takes a message, as every exception does: no signature of its own
        assert entry.group(1) and f">{name}<" in entry.group(1), f"the API reference shows no signature for {name}"


#: Names of ``openqa.__all__`` the API reference does not document from a docstring, and why (the page says so too).
NOT_IN_THE_API_REFERENCE = {"__version__": "a string, not an object with a docstring; the page's last section names it"}


def api_directives() -> dict[str, str]:
    """Every name of ``openqa.__all__`` (but the stated exceptions), with the ``::: path`` of docs/reference.md
    that documents it; a name without one, or whose path names another object, fails."""
    import openqa

    page = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    paths = re.findall(r"^::: *(\S+)\s*$", page, flags=re.M)
    found, missing = {}, []
    for name in openqa.__all__:
        if name in NOT_IN_THE_API_REFERENCE:
            assert f"`openqa.{name}`" in page, f"docs/reference.md does not say what {name} is"
            continue
        here = [p for p in paths if p.rsplit(".", 1)[-1] == name
                and getattr(importlib.import_module(p.rsplit(".", 1)[0]), name, None) is getattr(openqa, name)]
        if here:
            found[name] = here[0]
        else:
            missing.append(name)
    assert not missing, f"docs/reference.md has no `::: module.Name` for {missing}"
    return found


def exception_without_own_init(value: object) -> bool:
    """An exception class that takes its message as ``Exception`` does (no signature of its own to show)."""
    return isinstance(value, type) and issubclass(value, BaseException) and "__init__" not in vars(value)


def test_the_api_reference_names_every_public_name():
    import openqa

    assert set(api_directives()) | set(NOT_IN_THE_API_REFERENCE) == set(openqa.__all__)


@pytest.mark.spawns
def test_results_and_the_readme_table_are_what_the_records_make():
    code = ("import json, results_md; print(json.dumps([results_md.results_text(), results_md.headline_table(), "
            "list(results_md.README_MARKS)]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "scripts" / "maintenance", capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (ROOT / "scripts" / "maintenance", ROOT / "scripts", ROOT)))})
    assert done.returncode == 0, done.stderr
    results, table, marks = json.loads(done.stdout)
    assert (ROOT / "RESULTS.md").read_text() == results, "run python scripts/maintenance/results_md.py"
    readme = (ROOT / "README.md").read_text()
    start, end = (readme.index(mark) for mark in marks)
    assert readme[start + len(marks[0]):end].strip().splitlines() == table, "run python scripts/maintenance/results_md.py"


def test_the_readme_is_short_and_names_the_commands_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    for line in ci:
        assert f"\n{line}\n" in readme, f"the README does not show CI's command {line!r}"


def imports(path: Path) -> set[str]:
    """The ``openqa`` modules ``path`` imports anywhere (functions included; type-checking-only
    imports left out), as dotted names of files or packages that exist."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
                   for node in ast.walk(block)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name.startswith("openqa") and module_file(name) is not None}


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_no_module_imports_one_that_imports_it_back():
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p for p in PACKAGE.rglob("*.py")}
    # a submodule always imports its own packages first: those edges are Python's, not the code's
    graph = {name: {o for o in imports(path) if o != name and not name.startswith(o + ".")} for name, path in modules.items()}
    cycles, state = [], {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for other in sorted(graph.get(name, ())):
            if state.get(other) == "open":
                cycles.append(trail[trail.index(other):] + [other] if other in trail else [name, other])
            elif other not in state:
                visit(other, trail + [other])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


#: Numbers the pages may state as they are: constants of the code, the paper or the protocol, never
#: measurements (a measured figure is written with its record's marker, ``46.85<!-- fig record.json:key -->``,
#: by ``scripts/maintenance/docs_figures.py``, or lives on the results page, which RESULTS.md generates).
CONSTANTS = {
    "commands.md": {"80%", "20%", "60 s"},  # the train split; ES client timeout
    "internals.md": {"550 MB", "0.5", "0.2", "5 s", "2 s", "256 KB"},  # fault-suite address spaces; serve's heavy-request line, gone-client poll and stop limits; a heavy results read
    "llm-studies.md": {"95%"},  # the central share of draws an interval holds
    "troubleshooting.md": {"127.0", "0.1"},  # the loopback address 127.0.0.1
    "install.md": {"3.11"},  # the Python version
    "README.md": {"3.11", "20%"},  # the Python version; the coverage the results table reports
    "llm.md": {"95%"},  # the central share of draws an interval holds
    "methods.md": {"0.9", "0.35"},  # the paper's kD, bD
    "probabilities.md": {"25%", "100%", "95%", "0.1"},  # chance in the quoted sentence; coverages; intervals; the L2 penalty
    "serve.md": {"600 s", "127.0", "0.1", "4.5", "20 s", "10 s", "15 s", "30 s", "0.5", "136 KB", "0.2", "5 s", "2 s", "20%", "256 KB", "128 MB"},  # limits, addresses, a coverage, the kept replies
}
FIGURE_LIKE = re.compile(r"\d+(?:[.,]\d+)*\s?%|\b\d+\.\d+\b|\b\d+(?:,\d{3})*\s?(?:ms|MB|GB|KB|s|q/s)\b|\b\d+(?:\.\d+)?x\b")


def test_the_pages_state_no_measured_figure_by_hand():
    """A figure in the documentation comes from a record (written with its marker, or on the generated
    results page); anything else that looks like a measurement fails, so a page cannot go stale."""
    found = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```|<!-- results: written.*?<!-- results: end -->", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"`[^`]*`", "", docs_figures().FIGURE.sub("", text))
        stray = {m.group() for m in FIGURE_LIKE.finditer(text)} - CONSTANTS.get(page.name, set())
        if stray:
            found[page.name] = sorted(stray)
    assert not found, f"figures written by hand (write them from a record: VALUE<!-- fig record.json:key -->): {found}"


def docs_figures():
    """``scripts/maintenance/docs_figures.py``, which writes the pages' figures from the records."""
    spec = importlib.util.spec_from_file_location("openqa_docs_figures", ROOT / "scripts" / "maintenance" / "docs_figures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_figure_a_page_writes_is_its_records():
    """Each figure (and block) a page writes in place, with its marker, is what its record holds now,
    and no page is left with a placeholder for the site to fill (its source reads as text)."""
    figures = docs_figures()
    marked, stale, placeholders, unreadable = 0, [], [], []
    for page in figures.PAGES:
        text = page.read_text(encoding="utf-8")
        marked += len(figures.FIGURE.findall(text)) + len(figures.BLOCK.findall(text))
        stale += figures.stale(text, page.name)
        placeholders += [f"{page.name}:{n}" for n, line in enumerate(text.splitlines(), 1) if "{{" in line]
        # GitHub (CommonMark 0.29) shows a comment holding "--" as text: such a key is written URL-quoted
        unreadable += [inner for inner in re.findall(r"<!--( (?:fig|block) .*?)-->", text) if "--" in inner or inner.endswith("-")]
    assert marked > 100  # bank.md, llm.md, install.md, serve.md and the task page write theirs
    assert not stale, f"run python scripts/maintenance/docs_figures.py: {stale}"
    assert not placeholders, f"placeholders left in page sources: {placeholders}"
    assert not unreadable, f"markers GitHub would show as text: {unreadable}"


def test_a_figure_is_written_from_its_record_and_checked(tmp_path):
    """A hand-made results tree: markers are filled from it (a format, a list's index, a key with dots,
    a block of lines), a stale value is found, and a marker naming a missing key fails."""
    figures = docs_figures()
    (tmp_path / "runs" / "us").mkdir(parents=True)
    (tmp_path / "runs" / "us" / "us-test-x.json").write_text(json.dumps(
        {"accuracy": 32.6, "ci95": [30.08, 35.22], "at": {"0.7": {"n": 1273}}, "lines": ["a: 1", "b: 2"]}))
    page = ("took 0<!-- fig us-test-x.json:accuracy:.2f -->% (from 9<!-- fig us-test-x.json:ci95.0 -->), "
            "n 1<!-- fig us-test-x.json:at.0.7.n:, -->\n\n<!-- block us-test-x.json:lines -->\n```text\nold\n```\n")
    assert [s.written for s in figures.stale(page, results=tmp_path)] == ["0", "9", "1", "old"]
    written = figures.rewrite(page, results=tmp_path)
    assert written == ("took 32.60<!-- fig us-test-x.json:accuracy:.2f -->% (from 30.08<!-- fig us-test-x.json:ci95.0 -->), "
                       "n 1,273<!-- fig us-test-x.json:at.0.7.n:, -->\n\n<!-- block us-test-x.json:lines -->\n```text\na: 1\nb: 2\n```\n")
    assert figures.stale(written, results=tmp_path) == []
    with pytest.raises(SystemExit, match="has no ece"):
        figures.rewrite("0<!-- fig us-test-x.json:ece -->", results=tmp_path)


#: What only the development machines have: a folder beside the repository that the product never names.
DEVELOPMENT_ONLY = re.compile(r"\.\.[/\\]shared\b|\bshared[/\\]medqa\b")


def test_no_page_message_or_help_names_the_development_folder(monkeypatch):
    """The README, the pages (the results page RESULTS.md makes too), every string of the package
    (messages, help, docstrings) and every command's ``--help`` name no development-only path."""
    found = []
    for page in [ROOT / "README.md", ROOT / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found += [f"{page.name}:{n}" for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
                  if DEVELOPMENT_ONLY.search(line)]
    for path in sorted(PACKAGE.rglob("*.py")):
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and DEVELOPMENT_ONLY.search(node.value)]
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: a path is never broken across lines
    found += [f"openqa {' '.join(words)} --help" for words in every_command() if DEVELOPMENT_ONLY.search(printed_help(words))]
    assert not found, f"development-only paths named in: {found}"


#: The most bytes a screenshot of the documentation may take in the repository.
MAX_SCREENSHOT_BYTES = 300_000


def test_every_screenshot_of_the_docs_is_remade_by_one_script_that_says_what_it_needs(monkeypatch):
    """Each picture of the pages kept under ``docs/`` (the others are records' figures under
    eval/results) is one ``scripts/maintenance/screenshot_serve.py`` makes, and small; its ``--help``
    (which runs without selenium or Pillow) names each picture and what remaking them needs."""
    script = ROOT / "scripts" / "maintenance" / "screenshot_serve.py"
    spec = importlib.util.spec_from_file_location("openqa_screenshot_serve", script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks itself up there
    monkeypatch.setattr(sys, "path", list(sys.path))  # which it extends with scripts/
    spec.loader.exec_module(module)
    made = {picture.output for picture in module.PICTURES.values()}
    shown = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            if path.parent == ROOT / "docs":
                shown.add(path.relative_to(ROOT).as_posix())
    assert shown == made == {"docs/serve.png", "docs/results.png"}
    assert all((ROOT / name).stat().st_size < MAX_SCREENSHOT_BYTES for name in made)
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    for needed in (*made, "chromium-driver", "selenium", "Pillow", "OPENQA_DATA", "OPENQA_INDEXES", ".predictions.jsonl.gz"):
        assert needed in said, needed


def test_the_datasets_page_is_the_registry_and_its_example_files_read(tmp_path):
    """docs/datasets.md lists every registered dataset with the registry's language, options and exam
    (and nothing else), and each example question file it shows (marked ``<!-- question-file NAME -->``)
    is read by openqa's own readers into the same two questions with the same answers."""
    from openqa import read_question_file
    from openqa.data.questions import DATASETS

    page = (ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")
    rows = {m["name"]: m["cells"].split(" | ") for m in re.finditer(r"^\| `(?P<name>[\w-]+)` \| (?P<cells>.*) \|$", page, flags=re.M)
            if m["name"] != "--dataset"}  # the header row
    assert set(rows) == set(DATASETS), "the datasets table lists exactly the registered datasets"
    for name, spec in DATASETS.items():
        _, lang, options, exam, *_ = rows[name]
        assert (lang, options, exam) == (spec.lang, str(spec.n_options), spec.exam), name
    examples = re.findall(r"^<!-- question-file (?P<name>[\w.-]+) -->\n```\w*\n(?P<body>.*?)^```$", page, flags=re.M | re.S)
    assert {name for name, _ in examples} == {"quiz.jsonl", "benchmark.json", "quiz-medmcqa.jsonl", "quiz.csv"}
    read = []
    for name, body in examples:
        path = tmp_path / name
        path.write_text(body, encoding="utf-8")
        questions = read_question_file(path, subset="medqa" if name == "benchmark.json" else None)
        read.append([(q.question, q.options, q.answer_idx) for q in questions])
        assert len(questions) == 2, name
    assert all(questions == read[0] for questions in read), "every format's example holds the same questions"
