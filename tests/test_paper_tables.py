"""The paper's Tables 7 and 8 beside ours (``docs/paper-tables.md``), the README's results block and
RESULTS.md are exactly what ``scripts/maintenance/results_md.py`` writes from the paper's figures
(``scripts/maintenance/paper_tables.json``) and the records under ``eval/results/``; every figure of
ours on the page and in the README is its record's accuracy, with the books beside it; every cell of
the paper's tables has our figure or a reason; and the rules that choose records take whole splits
only, so new records are picked up as they land without cherry-picking a partial one."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

#: The two maintenance modules, as the ``scripts`` fixture gives them.
Scripts = tuple[ModuleType, ModuleType]

ROOT = Path(__file__).resolve().parents[1]
MAINTENANCE = ROOT / "scripts" / "maintenance"
PAGE = ROOT / "docs" / "paper-tables.md"
#: The best test figure of each exam the paper's abstract gives (arXiv 2009.13081): English, simplified Chinese, traditional Chinese.
ABSTRACT = {"us": 36.7, "mainland": 70.1, "tw": 42.0}


@pytest.fixture(scope="module")
def scripts() -> Iterator[tuple[ModuleType, ModuleType]]:
    """``paper_tables`` and ``results_md`` as the maintenance script imports them (``scripts/`` and
    ``scripts/maintenance/`` on the import path, for this module's tests only)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "path", [str(MAINTENANCE), str(ROOT / "scripts"), *sys.path])
        for name in ("paper_tables", "results_md"):
            patch.delitem(sys.modules, name, raising=False)
        import paper_tables
        import results_md

        yield paper_tables, results_md


def table_rows(text: str) -> list[dict[str, str]]:
    """Every row of every Markdown table of ``text``, as {header: cell}."""
    rows, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(line) <= set("|-"):
            rows.append(dict(zip(header, cells)))
    return rows


def readme_block(marks: tuple[str, str]) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = (readme.index(mark) for mark in marks)
    return readme[start + len(marks[0]):end]


def test_the_page_the_readme_block_and_results_are_what_the_records_make(scripts: Scripts) -> None:
    paper_tables, results_md = scripts
    assert PAGE.read_text(encoding="utf-8") == paper_tables.page_text(), "run python scripts/maintenance/results_md.py"
    assert readme_block(results_md.README_MARKS).strip().splitlines() == results_md.headline_table(), \
        "run python scripts/maintenance/results_md.py"
    assert (ROOT / "RESULTS.md").read_text() == results_md.results_text(), "run python scripts/maintenance/results_md.py"


def test_every_figure_of_ours_is_its_records_accuracy_with_its_books(scripts: Scripts) -> None:
    """Each row naming a record (the page's tables and the README's) shows that record's accuracy, and
    an English figure says "11 books" in its row (a Chinese one "33 books")."""
    paper_tables, results_md = scripts
    texts = {"docs/paper-tables.md": PAGE.read_text(encoding="utf-8"), "README.md": readme_block(results_md.README_MARKS)}
    checked = 0
    for name, text in texts.items():
        for row in table_rows(text):
            where = [cell.strip("`") for cell in row.values() if re.fullmatch(r"`eval/results/\S+\.json`", cell)]
            if not where:
                continue
            record = json.loads((ROOT / where[0]).read_text(encoding="utf-8"))
            ours = next(cell for header, cell in row.items() if header.startswith(("ours %", "openqa's best")))
            shown = re.match(r"\**(\d+\.\d\d)\**", ours)
            assert shown and float(shown.group(1)) == round(record["accuracy"], 2), f"{name}: {row}"
            assert paper_tables.books(record["dataset"]) in " ".join(row.values()), f"{name}: {row}"
            checked += 1
    assert checked >= 20  # the page's rows with records, and the README's four


def test_every_cell_of_the_papers_tables_has_our_figure_or_a_reason(scripts: Scripts) -> None:
    paper_tables, _ = scripts
    table = json.loads((MAINTENANCE / "paper_tables.json").read_text(encoding="utf-8"))
    assert "2009.13081" in table["paper"] and table["transcription"]
    page = PAGE.read_text(encoding="utf-8")
    shown = {(row["paper row"], row["ours on"], row["split"]): row for row in table_rows(page) if "paper row" in row}
    cells = paper_tables.paper_cells()
    for row in table["rows"]:
        assert row["source"].startswith("arXiv 2009.13081, Tables 7-8")
        for exam, datasets in paper_tables.EXAMS.items():
            for split in paper_tables.SPLITS:
                figure = row["cells"][exam][split]
                mine = [c for c in cells if (c.row, c.exam, c.split) == (row["row"], exam, split)]
                assert {c.dataset for c in mine} >= set(datasets) - set(paper_tables.SHOWN_IF_RECORDED), (row["row"], exam, split)
                for cell in mine:
                    line = shown[(row["row"], paper_tables.LABELS[cell.dataset], split)]
                    if figure is None:  # the paper's figure not found: said so, and why, once for the row
                        assert row["not_found"] and line["the paper %"] == paper_tables.NOT_FOUND
                        assert f"- {row['row']}: {row['not_found']}." in page
                    else:
                        assert 0 < figure < 100 and line["the paper %"].startswith(f"{figure:.1f}")
                    if cell.run is None:  # no record of ours: a one-line reason instead
                        assert line["ours %"] == "none" and line["record"] == "" and line["what differs"].startswith("no ")
                    else:
                        assert cell.run.whole and line["record"] == f"`{cell.run.where}`"
    best = next(row for row in table["rows"] if row["row"] == paper_tables.BEST_ROW)
    assert {exam: best["cells"][exam]["test"] for exam in ABSTRACT} == ABSTRACT
    chinese = [c for c in cells if c.row == paper_tables.BEST_ROW and c.dataset in paper_tables.CHINESE and c.run is None]
    assert paper_tables.missing(best, "tw-zh", "dev") == best["no_model"]["zh"] != paper_tables.missing(best, "tw-en", "dev")
    for cell in chinese:  # their reason is the model, on dev as on test
        assert shown[(cell.row, paper_tables.LABELS[cell.dataset], cell.split)]["what differs"] == best["no_model"]["zh"]


def test_the_rules_take_whole_splits_and_pick_up_new_records(scripts: Scripts, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record over part of a split never counts, however high; ties go to the shorter name; a reader
    record that lands later fills the paper's reader row by its kind, with no change to the code."""
    paper_tables, _ = scripts
    folder = ROOT / "eval" / "results" / "runs" / "mainland"

    def run(name: str, accuracy: float, **fields: object) -> Any:
        record = {"dataset": "mainland", "split": "test", "method": "ensemble", "n": 3426, "accuracy": accuracy, "limit": None, **fields}
        return paper_tables.Run(folder / name, record)

    plain, same, partial = run("mainland-test-ensemble.json", 50.0), run("mainland-test-ensemble-x.json", 50.0), \
        run("mainland-test-ensemble-limit100.json", 90.0, n=100, limit=100)
    later = run("mainland-test-ensemble-from100.json", 90.0, n=3326, offset=100)
    assert not partial.whole and not later.whole and plain.whole
    assert paper_tables.best_test("mainland", [partial, later, same, plain]) is plain
    reader = run("mainland-test-reader-maxout-mainland.json", 45.0, method="reader", variant="maxout-mainland")
    cell = next(c for c in paper_tables.paper_cells([reader]) if (c.row, c.exam, c.split) == ("Max-out", "mainland", "test"))
    assert cell.run is reader and "training questions" in cell.differs
    assert reader not in paper_tables.other_runs([reader])
    # among readers of a row, the one that learned from the most questions, however low its test figure
    us = ROOT / "eval" / "results" / "runs" / "us"
    cut = paper_tables.Run(us / "us-test-reader-maxout-us.json", {**reader.record, "dataset": "us", "n": 1273,
                                                                  "accuracy": 90.0, "variant": "maxout-us"})
    full = paper_tables.Run(us / "us-test-reader-maxout-us-crossfit5.json", {**cut.record, "accuracy": 20.0,
                                                                             "variant": "maxout-us-crossfit5"})
    assert paper_tables.training(cut)["train_questions"] < paper_tables.training(full)["train_questions"]
    cell = next(c for c in paper_tables.paper_cells([cut, full]) if (c.row, c.exam, c.split) == ("Max-out", "us", "test"))
    assert cell.run is full
    # a Max-out run made before its GRUs read packed rows says so, and awaits a rerun; one made after does not
    early, late = ({**full.record, "reader": "maxout", "date": date} for date in ("2026-11-29T07:00:00+0000", "2026-11-29T09:00:00+0000"))
    assert paper_tables.before_packed(early) and not paper_tables.before_packed(late)
    assert not paper_tables.before_packed({**early, "reader": "bert", "variant": "bert-minilm-us"})
    cells = {when: next(c for c in paper_tables.paper_cells([paper_tables.Run(full.path, record)])
                        if (c.row, c.exam, c.split) == ("Max-out", "us", "test")) for when, record in (("early", early), ("late", late))}
    assert paper_tables.BEFORE_PACKED in cells["early"].differs and paper_tables.BEFORE_PACKED not in cells["late"].differs
    # readers that learned from as many questions: the better on the dev questions that chose their checkpoint
    trained = {"maxout-us": {"train_questions": 1018, "best_selection_accuracy": 31.0},
               "maxout-us-crossfit5": {"train_questions": 1018, "best_selection_accuracy": 29.0}}
    monkeypatch.setattr(paper_tables, "training", lambda run: trained[run.variant])
    cell = next(c for c in paper_tables.paper_cells([cut, full]) if (c.row, c.exam, c.split) == ("Max-out", "us", "test"))
    assert cell.run is cut


def test_a_marks_note_stands_under_a_table_only_while_a_row_carries_the_mark(scripts: Scripts) -> None:
    """RESULTS.md explains † and ‡ under a table only while some row is marked: once every marked run is
    rerun, its note goes too."""
    paper_tables, results_md = scripts
    marked = ["| us | test | reader (maxout-us) ‡ | 1273 |", "| us | test | pmi | 1273 |"]
    notes = (results_md.FORMER_TIES_NOTE, paper_tables.BEFORE_PACKED_NOTE)
    assert results_md.marks_noted(marked, *notes) == [paper_tables.BEFORE_PACKED_NOTE, ""]
    assert results_md.marks_noted(marked[1:], *notes) == []
    assert results_md.marks_noted(["| us | test | dense † | 1273 |", *marked], *notes) == [notes[0], "", notes[1], ""]


def test_split_sizes_are_those_of_the_records_over_whole_splits(scripts: Scripts) -> None:
    """A run's record with no limit and no offset covers its whole split: its n is the size the rules
    expect (a compact LLM part put together from slices may cover part of one while its slices run)."""
    paper_tables, _ = scripts
    for run in paper_tables.runs():
        if (run.dataset in paper_tables.SPLIT_SIZES and not run.record.get("limit") and not run.record.get("offset")
                and "llm-parts" not in str(run.where)):
            assert run.whole, run.where


def test_the_page_is_in_the_site_and_linked() -> None:
    assert ": paper-tables.md\n" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "(docs/paper-tables.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(paper-tables.md)" in (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    page = PAGE.read_text(encoding="utf-8")
    assert "shared/" not in page and "/work/" not in page  # the data folder is named as such, never by a path here
