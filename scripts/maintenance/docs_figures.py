"""Write the documentation's measured figures into its pages, in place, from the records under
eval/results/ (so a page's source reads as text, on GitHub too, and every figure still has a record
behind it); ``tests/test_docs.py`` checks that each written figure is its record's.

A figure is written as its value followed by a marker, an HTML comment (hidden on the site and on
GitHub) naming the record by its file name, the key (dotted: ``confidence.ece``; a list's index:
``ci95.0``; a key that holds dots, ``0.7``, is found too; URL-quoted where it holds what a comment
may not, ``%2D%2Dhelp`` for ``--help``) and optionally a format (Python's ``format`` spec):

    the bank alone answers 46.85<!-- fig mainland-test-bank.json:accuracy:.2f -->% of them

The value comes first: a comment that starts a line would end the paragraph on the site. A value is
a number or a word (letters, digits, ``.``, ``,``, ``+``, ``-``, ``_``). A fenced block can be
written the same way, from a string or a list of lines, by a marker on the line above it:

    <!-- block tasks.json:tasks.reproduce.steps.0.output -->
    ```text
    us test ir-custom: 32.60% (415/1273), ...
    ```

    python scripts/maintenance/docs_figures.py           # rewrite the figures of every page
    python scripts/maintenance/docs_figures.py --check   # list those that differ from their records; exit 1 if any
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import REPO, RESULTS, record_path

#: The pages whose figures are written from records.
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
_SOURCE = r"(?P<file>[\w.+-]+\.json):(?P<key>[^:<>\n]+?)"
#: A figure: its value, then ``<!-- fig FILE:KEY[:FORMAT] -->``.
FIGURE = re.compile(r"(?P<value>[\w.,+-]*)<!-- fig " + _SOURCE + r"(?::(?P<spec>[^\s<>]+))? -->")
#: A block: ``<!-- block FILE:KEY -->`` on its own line, then a fenced block whose lines are the record's.
BLOCK = re.compile(r"^<!-- block " + _SOURCE + r" -->\n(?P<fence>```+|~~~+)(?P<lang>[^\n]*)\n(?P<body>.*?)\n?(?P=fence)$",
                   flags=re.M | re.S)
#: What a value may hold (the part of ``FIGURE`` before its marker).
VALUE = re.compile(r"[\w.,+-]+")


class Stale(NamedTuple):
    """A figure or block of a page that is not what its record holds now."""
    page: str
    source: str
    written: str
    expected: str


def lookup(file: str, key: str, results: Path = RESULTS) -> Any:
    """The value at ``key`` in the record named ``file``, found by its name in the results tree
    ``results`` (``benchlib.record_path``); a missing record or key is an error naming both."""
    path = record_path(file, results)
    if not path.is_file():
        raise SystemExit(f"no record {file} under {results} (a figure of the documentation)")
    value: Any = json.loads(path.read_text(encoding="utf-8"))
    parts = unquote(key).split(".")
    while parts:  # a dict's key (the longest that matches: "0.7" too), or a list's index (ci95.0: an interval's low end)
        if isinstance(value, list) and parts[0].isdigit() and int(parts[0]) < len(value):
            value, parts = value[int(parts[0])], parts[1:]
            continue
        taken = next((n for n in range(len(parts), 0, -1) if isinstance(value, dict) and ".".join(parts[:n]) in value), 0)
        if not taken:
            raise SystemExit(f"{file} has no {key} (a figure of the documentation)")
        value, parts = value[".".join(parts[:taken])], parts[taken:]
    return value


def figure(file: str, key: str, spec: str | None, results: Path = RESULTS) -> str:
    """The figure a marker names, as the page writes it."""
    value = lookup(file, key, results)
    text = format(value, spec) if spec else str(value)
    if not VALUE.fullmatch(text):
        raise SystemExit(f"{file}:{key} is {text!r}: a figure written in a page is a number or a word (use a block)")
    return text


def block(file: str, key: str, results: Path = RESULTS) -> str:
    """The lines of a block a marker names: a string, or a list of lines."""
    value = lookup(file, key, results)
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value).rstrip("\n")


def rewrite(text: str, results: Path = RESULTS) -> str:
    """``text`` with every marked figure and block written from its record."""
    text = FIGURE.sub(lambda m: figure(m["file"], m["key"], m["spec"], results) + m.group()[len(m["value"]):], text)

    def fill(m: re.Match[str]) -> str:
        body = block(m["file"], m["key"], results)
        return f"<!-- block {m['file']}:{m['key']} -->\n{m['fence']}{m['lang']}\n{body}\n{m['fence']}"

    return BLOCK.sub(fill, text)


def stale(text: str, page: str = "", results: Path = RESULTS) -> list[Stale]:
    """The marked figures and blocks of ``text`` that differ from their records."""
    found = []
    for m in FIGURE.finditer(text):
        expected = figure(m["file"], m["key"], m["spec"], results)
        if m["value"] != expected:
            found.append(Stale(page, f"{m['file']}:{m['key']}", m["value"], expected))
    for m in BLOCK.finditer(text):
        expected = block(m["file"], m["key"], results)
        if m["body"] != expected:
            found.append(Stale(page, f"{m['file']}:{m['key']}", m["body"], expected))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only list the figures that differ from their records")
    args = parser.parse_args()
    if args.check:
        found = [s for page in PAGES for s in stale(page.read_text(encoding="utf-8"), page.relative_to(REPO).as_posix())]
        for s in found:
            print(f"{s.page}: {s.source} is {s.written!r}, its record says {s.expected!r}")
        raise SystemExit(1 if found else 0)
    changed = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed.append(page.relative_to(REPO).as_posix())
    print(f"wrote the figures of {', '.join(changed)}" if changed else "every page's figures are its records'")


if __name__ == "__main__":
    main()
