"""MkDocs hooks: the command reference is generated from openqa's own argparse parser when the site
is built (never written twice), and the results page takes the figures RESULTS.md holds, which
``scripts/maintenance/results_md.py`` writes from the records under eval/results/. The other pages'
figures are written in their sources (``scripts/maintenance/docs_figures.py``): nothing to fill here."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

MARKER = "<!-- openqa-cli-reference -->"
RESULTS_MARKER = "<!-- openqa-results -->"
ROOT = Path(__file__).resolve().parents[1]
#: The results tree, whose PNG figures the site serves under figures/, in the same folders.
FIGURES = ROOT / "eval" / "results"


#: The width help is formatted at on the page (argparse reads ``$COLUMNS``); ``openqa COMMAND --help``
#: prints the same text in a terminal of this width.
HELP_COLUMNS = 100


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of ``parser`` as (its words after ``openqa``, its parser), nested ones (``corpus stats``) after theirs."""
    found = [(prefix, parser)]
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, (*prefix, name))
    return found


def help_text(parser: argparse.ArgumentParser, columns: int = HELP_COLUMNS) -> str:
    """What ``--help`` prints for ``parser`` in a terminal ``columns`` wide (argparse's own formatting)."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        return parser.format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def cli_reference() -> str:
    """Every command of ``openqa``, each as ``openqa COMMAND --help`` prints it, from ``openqa.cli.build_parser``."""
    from openqa.cli import build_parser

    out = []
    for words, parser in commands(build_parser()):
        if words:
            out += [f"{'#' * (len(words) + 1)} openqa {' '.join(words)}", ""]
        out += ["```text", help_text(parser).rstrip("\n"), "```", ""]
    return "\n".join(out)


def results_page() -> str:
    """RESULTS.md below its title, its figures linked where the site serves them."""
    text = (ROOT / "RESULTS.md").read_text(encoding="utf-8").split("\n", 1)[1]
    return text.replace("](eval/results/", "](figures/")


def on_files(files: Any, config: Any) -> Any:
    """Serve the PNG figures of eval/results/ under figures/, each in its folder there (the records stay where they are)."""
    from mkdocs.structure.files import File

    for png in sorted(FIGURES.rglob("*.png")):
        files.append(File.generated(config, f"figures/{png.relative_to(FIGURES).as_posix()}", abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
    return markdown.replace(RESULTS_MARKER, results_page()) if RESULTS_MARKER in markdown else markdown
