"""MkDocs hooks: the command reference is generated from openqa's own argparse parser when the site
is built (never written twice), and the results page takes the figures RESULTS.md holds, which
``scripts/maintenance/results_md.py`` writes from the records under eval/results/."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

MARKER = "<!-- openqa-cli-reference -->"
RESULTS_MARKER = "<!-- openqa-results -->"
ROOT = Path(__file__).resolve().parents[1]
#: The records of eval/results/ whose figures the pages show (a record found by name: ``find_record``);
#: its PNG figures are served under figures/, in the same folders.
FIGURES = ROOT / "eval" / "results"


def _usage(parser: argparse.ArgumentParser) -> str:
    """One command's usage and options as Markdown (its help text, then a table of its flags)."""
    lines = [f"```\n{parser.format_usage().strip()}\n```", ""]
    if parser.description:
        lines += [parser.description, ""]
    rows = []
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        flags = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        text = (action.help or "").replace("|", "\\|").replace("\n", " ")
        if action.choices and not isinstance(action.choices, dict):
            text += f" (one of: {', '.join(map(str, action.choices))})"
        rows.append(f"| {flags} | {text} |")
    if rows:
        lines += ["| option | what it does |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def cli_reference() -> str:
    """Every command of ``openqa`` with its options, from ``openqa.cli.build_parser``."""
    from openqa.cli import build_parser

    parser = build_parser()
    out = [_usage(parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                out += [f"## openqa {name}", "", helps.get(name) or "", "", _usage(sub)]
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


#: ``{{ FILE:dotted.key }}`` or ``{{ FILE:dotted.key:FORMAT }}``: a figure read from the record FILE under eval/results/
#: (named by its file name alone: ``openqa.evaluate.results.find_record`` knows its folder).
FIGURE = re.compile(r"\{\{\s*([\w.+-]+\.json):([\w.]+)(?::([^}\s]+))?\s*\}\}")


def figure(match: re.Match[str]) -> str:
    """The value a placeholder names, formatted; a missing record or key fails the build."""
    from openqa.evaluate.results import find_record

    file, key, spec = match.groups()
    value: Any = json.loads(find_record(FIGURES, file).read_text(encoding="utf-8"))
    parts = key.split(".")
    while parts:  # a dict's key (the longest that matches: "0.7" too), or a list's index (ci95.0: an interval's low end)
        if isinstance(value, list) and parts[0].isdigit() and int(parts[0]) < len(value):
            value, parts = value[int(parts[0])], parts[1:]
            continue
        taken = next((n for n in range(len(parts), 0, -1) if isinstance(value, dict) and ".".join(parts[:n]) in value), 0)
        if not taken:
            raise ValueError(f"{file} has no {key} (a figure of the documentation)")
        value, parts = value[".".join(parts[:taken])], parts[taken:]
    return format(value, spec) if spec else str(value)


def figures(markdown: str) -> str:
    """Every figure placeholder of a page replaced by its record's value."""
    return FIGURE.sub(figure, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = figures(markdown)
    markdown = markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
    return markdown.replace(RESULTS_MARKER, results_page()) if RESULTS_MARKER in markdown else markdown
