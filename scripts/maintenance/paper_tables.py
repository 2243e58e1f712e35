"""The paper's Tables 7 and 8 beside openqa's figures: ``docs/paper-tables.md`` and the README's one
small table of each exam's best test figure, written from the paper's figures (``paper_tables.json``
beside this file, with their source) and the evaluation records under ``eval/results/``.

Every figure of ours on the page is a record's ``accuracy``, and every row names its record, so a
reader can check each one; a cell with no record says why in one line. ``results_md.py`` calls this
module (``python scripts/maintenance/results_md.py`` writes the page with RESULTS.md and the README).

Which records count, by rule (new records are picked up as they land):

- a record over the **whole** split: no ``limit``, no ``offset``, and ``n`` the split's size (records
  over part of a split are left out: they are not comparable with the paper's whole-split figures);
- the paper's rule-based rows (PMI, IR-ES, IR-Custom) take the method's default record, the one without a
  variant (``<dataset>-<split>-<method>.json``, the dev-tuned settings that ship with openqa);
- the paper's trained-reader rows take records of ``--method reader`` (and, on dev, cross-fits'
  out-of-fold records) whose reader is of the row's kind
  (Max-out: ``maxout``; BERT-family: ``bert``), where there are several the one whose reader learned
  from the most questions, then the best on the dev questions that chose its checkpoint (never the
  best test figure); the kind is
  the record's own ``reader`` field where it has one, else its training record's
  (``train-<checkpoint>.run.json``), else the first word of its checkpoint's name;
- every other whole-split record of an exam's dataset is a row the paper does not have.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib

from benchlib import REPO, RESULTS, record_path

#: A record as its JSON file holds it.
Record = dict[str, Any]

#: The paper's figures, with their source.
PAPER_FILE = Path(__file__).with_name("paper_tables.json")
#: The page this module writes.
PAGE = REPO / "docs" / "paper-tables.md"
#: The lines around what results_md.py writes into a page (this one, and the README's results block): the
#: documentation's test of hand-written figures leaves what lies between them to the tests of the records.
GENERATED = ("<!-- results: written by scripts/maintenance/results_md.py -->", "<!-- results: end -->")
SPLITS = ("dev", "test")
#: The number of questions of each dataset's split in the MedQA release (4 and 5 options alike): a
#: record with another ``n`` covers part of the split only.
SPLIT_SIZES = {"us": (1272, 1273), "us5": (1272, 1273), "mainland": (3425, 3426), "mainland5": (3425, 3426),
               "tw": (1412, 1413), "tw-en": (1412, 1413), "tw-zh": (1412, 1413)}
#: How the pages name each dataset.
LABELS = {"us": "US", "us5": "US, 5 options", "mainland": "MCMLE", "mainland5": "MCMLE, 5 options",
          "tw-en": "TW-en", "tw-zh": "TW-zh", "tw": "TW, as released"}
#: The datasets read against the Chinese books (the others against the English ones).
CHINESE = ("mainland", "mainland5", "tw", "tw-zh")
#: The paper's exams (keys of ``paper_tables.json``) with our datasets of their 4-option questions: the
#: paper's Taiwan rows stand beside the release's English translation (``tw-en``), its conversion to
#: simplified Chinese (``tw-zh``) and, where a record exists, the questions as released (``tw``).
EXAMS = {"us": ("us",), "mainland": ("mainland",), "tw": ("tw-en", "tw-zh", "tw")}
#: Datasets shown under a paper row only when they have a record for it.
SHOWN_IF_RECORDED = ("tw",)
#: What the text of a Taiwan dataset is, where it differs from the questions as the exam set them.
TEXTS = {"tw-en": "text: the release's English translation", "tw-zh": "text: the release's simplified-Chinese conversion"}
#: The README's exams, in order: our dataset and the paper's exam it stands beside.
README_EXAMS = (("us", "us"), ("mainland", "mainland"), ("tw-en", "tw"), ("tw-zh", "tw"))
#: The paper row whose figures are each exam's best.
BEST_ROW = "BERT-family, the exam's best"
#: What a paper cell whose figure was not found says (the row's reason is listed once, under the intro).
NOT_FOUND = "not found"
#: When Max-out's GRUs began to read each row's own words, as packed rows would (``openqa/readers/maxout.py``): before, a padded row's
#: backward direction started in the batch's padding, so a question's scores moved slightly (about 1e-4
#: on a logit) with the questions batched beside it. Max-out records made before are marked, and await a rerun.
PACKED_SINCE = datetime.strptime("2026-11-29T07:33:51+0000", "%Y-%m-%dT%H:%M:%S%z")
#: The mark of those records, and what it says under the tables.
BEFORE_PACKED = "‡"
BEFORE_PACKED_NOTE = (f"{BEFORE_PACKED} a Max-out reader run before its GRUs read each row's own words (its scores moved by about 1e-4 with "
                      "the questions batched beside it; the fix came with a test that a question scores as it would alone); "
                      "these rows await a rerun of their command.")


def before_packed(record: Record) -> bool:
    """Whether ``record`` (an eval record or a training record) is a Max-out run made before ``PACKED_SINCE``."""
    maxout = record.get("reader") == "maxout" or str(record.get("variant") or "").startswith("maxout")
    date = record.get("date")
    return maxout and bool(date) and datetime.strptime(str(date), "%Y-%m-%dT%H:%M:%S%z") < PACKED_SINCE


def books(dataset: str) -> str:
    """The textbooks behind a dataset's figures: this copy of MedQA has 11 of the 18 English books, all 33 Chinese."""
    return "33 books" if dataset in CHINESE else "11 books"


def paper() -> Record:
    """The paper's figures and their source (``paper_tables.json``)."""
    data: Record = json.loads(PAPER_FILE.read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class Run:
    """One evaluation record of the results tree: its file and what it holds."""

    path: Path
    record: Record

    @property
    def where(self) -> str:
        """The record's path as the pages write it (``eval/results/...``)."""
        return self.path.relative_to(REPO).as_posix()

    @property
    def dataset(self) -> str:
        return str(self.record["dataset"])

    @property
    def split(self) -> str:
        return str(self.record["split"])

    @property
    def method(self) -> str:
        return str(self.record.get("method") or "")

    @property
    def variant(self) -> str:
        return str(self.record.get("variant") or "")

    @property
    def accuracy(self) -> float:
        return float(self.record["accuracy"])

    @property
    def whole(self) -> bool:
        """Whether the record covers its whole split (no ``limit`` or ``offset``, ``n`` the split's size)."""
        sizes = SPLIT_SIZES.get(self.dataset)
        size = sizes[SPLITS.index(self.split)] if sizes and self.split in SPLITS else None
        return not self.record.get("limit") and not self.record.get("offset") and self.record.get("n") == size

    @property
    def figure(self) -> str:
        """Its accuracy as the pages write it: two decimals and the books behind it."""
        return f"{self.accuracy:.2f} ({books(self.dataset)})"


def runs() -> list[Run]:
    """Every evaluation record of the results tree with an accuracy: the runs (``runs/``), the LLM
    parts put together from slices (``llm-parts/``) and the cross-fits' out-of-fold dev figures
    (``training/train-*-crossfit*.json``: each dev question scored by a reader that never saw it), by path."""
    paths = [*(RESULTS / "runs").rglob("*.json"), *(RESULTS / "llm-parts").glob("*.json"),
             *(path for path in (RESULTS / "training").glob("train-*-crossfit*.json") if not path.name.endswith(".run.json"))]
    found = [Run(path, json.loads(path.read_text(encoding="utf-8"))) for path in sorted(paths)]
    return [run for run in found if {"dataset", "split", "n", "accuracy"} <= run.record.keys()]


def training(run: Run) -> Record | None:
    """The training record of a reader's run (``train-<checkpoint>.run.json``), when there is one."""
    path = record_path(f"train-{run.variant}.run.json")
    return json.loads(path.read_text(encoding="utf-8")) if run.variant and path.is_file() else None


def reader_kind(run: Run) -> str | None:
    """Which reader a ``--method reader`` run used: the record's ``reader``, else its training record's,
    else the first word of its checkpoint's name (``maxout-us``: ``maxout``); None for other methods."""
    if run.method != "reader":
        return None
    trained = training(run) or {}
    return str(run.record.get("reader") or trained.get("reader") or run.variant.split("-")[0])


@dataclass(frozen=True)
class Cell:
    """One cell of the paper's tables (a row, an exam, a split) beside one of our datasets: the
    paper's figure (None: not found, ``note`` says why), our run (None: ``differs`` says why), and in one
    phrase what differs between the two."""

    row: str
    exam: str
    split: str
    dataset: str
    paper: float | None
    note: str
    run: Run | None
    differs: str


def matches(row: Record, run: Run) -> bool:
    """Whether ``run`` is one of ours for the paper row ``row`` (whatever the dataset and split)."""
    if row["kind"] == "method":
        return run.method == row["method"] and not run.variant
    if row["kind"] == "reader":
        return reader_kind(run) in row["readers"]
    return False


def difference(row: Record, exam: str, dataset: str, run: Run) -> str:
    """In one phrase, what differs between the paper's figure and ours: the books, the text of the
    questions, and for a trained reader its training questions and, for the BERT-family, its model."""
    parts = ["books: all 33 Chinese books, as the paper" if dataset in CHINESE else "books: 11 of the paper's 18 English books"]
    if dataset in TEXTS:
        parts.append(TEXTS[dataset])
    if row["kind"] == "reader":
        trained = training(run) or {}
        questions = f"{trained['train_questions']:,} of dev" if "train_questions" in trained else "dev"
        if "cross_fit" in run.record:
            k = run.record["cross_fit"]["k"]
            questions = f"dev, cross-fitted in {k} folds (each question scored by a reader trained on the other {k - 1})"
        parts.append(f"training questions: {questions} (no train split in this copy)")
        if exam in row.get("models", {}):
            parts.append(f"model: {trained.get('model') or run.variant}, not the paper's {row['models'][exam]}")
        if before_packed(run.record):
            parts.append(f"{BEFORE_PACKED} run before Max-out's GRUs read each row's own words, awaits a rerun")
    return "; ".join(parts)


def missing(row: Record, dataset: str, split: str) -> str:
    """In one line, why there is no run of ours for the paper row ``row`` on ``dataset``'s ``split``."""
    if row["kind"] == "chance":
        return "no record needed: chance is one option in four on every split here"
    if row["kind"] == "unmatched":
        return "no model matched: the paper's per-model figures were not found (our BERT-family readers are in the row above)"
    if row["kind"] == "method":
        return f"no record yet: `openqa eval --dataset {dataset} --split {split} --method {row['method']}` has not been run"
    if dataset in CHINESE and "zh" in row.get("no_model", {}):
        return str(row["no_model"]["zh"])
    if split == "dev":
        return ("no cross-fit yet: readers here train on dev (no train split in this copy), so only a cross-fit "
                "(`openqa train --cross-fit 5`) scores all of dev with readers that never saw each question")
    return f"no record yet: no {row['row'].split(',')[0]} reader trained on {LABELS[dataset]} here"


def chosen_by(row: Record, run: Run) -> tuple[float, float, int]:
    """What picks our record for a paper row among several (the highest wins; ties go to the shorter
    name): for a reader row, the number of questions the reader learned from (the fullest training
    protocol), then its accuracy on the questions that chose its checkpoint (dev, never test: a record
    is never picked by its test figure); for the others, which have one default record per split, its
    accuracy."""
    if row["kind"] == "reader":
        trained = training(run) or {}
        selection = trained.get("best_selection_accuracy", run.record.get("selection_accuracy"))
        return float(trained.get("train_questions") or run.record["n"]), float(selection or 0), -len(run.path.name)
    return run.accuracy, 0.0, -len(run.path.name)


def paper_cells(found: list[Run] | None = None) -> list[Cell]:
    """Every cell of the paper's tables, exam by exam, row by row, split by split, beside each of our
    datasets for that exam (those of ``SHOWN_IF_RECORDED`` only where they have a record for it)."""
    found = runs() if found is None else found
    table = paper()
    cells = []
    for exam, datasets in EXAMS.items():
        for row in table["rows"]:
            for split in SPLITS:
                figure = row["cells"][exam][split]
                note = row.get("models", {}).get(exam, "") if figure is not None else NOT_FOUND
                for dataset in datasets:
                    mine = [run for run in found if run.dataset == dataset and run.split == split and run.whole and matches(row, run)]
                    best = max(mine, key=lambda run: chosen_by(row, run), default=None)
                    if best is None and dataset in SHOWN_IF_RECORDED:
                        continue
                    differs = difference(row, exam, dataset, best) if best else missing(row, dataset, split)
                    cells.append(Cell(row["row"], exam, split, dataset, figure, note, best, differs))
    return cells


def paper_figure(dataset: str, split: str, method: str) -> float | None:
    """The paper's figure for a rule-based method's split of the exam ``dataset`` stands beside (None:
    a dataset or method the paper's tables do not have, or a figure not found)."""
    exam = next((exam for exam, datasets in EXAMS.items() if dataset in datasets), None)
    rows = [row for row in paper()["rows"] if row["kind"] == "method" and row["method"] == method]
    return rows[0]["cells"][exam][split] if exam and rows and split in SPLITS else None


def describe(run: Run) -> str:
    """What a run the paper's tables do not have is: its method, variant and, for an ensemble, its parts."""
    if "llm-parts" in run.path.parts:
        settings = run.record.get("settings", {})
        evidence = "closed book" if settings.get("evidence") == "none" else f"{settings.get('evidence')} evidence"
        return f"LLM part alone ({run.record.get('model')}, {evidence})"
    label = run.method + (f" `{run.variant}`" if run.variant else "")
    weights = run.record.get("settings", {}).get("weights") or {}
    parts = list(dict.fromkeys(name.split(":")[0] for name in weights))  # in the record's order, once each
    return label + (f": {', '.join(parts)}" if parts else "")


def other_runs(found: list[Run] | None = None) -> list[Run]:
    """The whole-split runs of the exams' datasets that no cell of the paper's tables shows, by dataset
    (as ``LABELS`` orders them), split and name."""
    found = runs() if found is None else found
    shown = {cell.run.path for cell in paper_cells(found) if cell.run}
    order = list(LABELS)
    rest = [run for run in found if run.whole and run.dataset in LABELS and run.path not in shown]
    return sorted(rest, key=lambda run: (order.index(run.dataset), SPLITS.index(run.split), run.path.name))


def best_test(dataset: str, found: list[Run] | None = None) -> Run | None:
    """Our best test figure for ``dataset``: the highest accuracy among records over the whole test
    split (any method); ties go to the record with the shorter file name (the plainer run)."""
    found = runs() if found is None else found
    whole = [run for run in found if run.dataset == dataset and run.split == "test" and run.whole]
    return max(whole, key=lambda run: (run.accuracy, -len(run.path.name)), default=None)


#: The rule the README and the page state for "best".
BEST_RULE = ("the highest accuracy among the records over the whole test split, whatever the method (records over "
             "part of it, `--limit` or `--offset`, do not count); ties go to the shorter record name")
#: What the paper's best figure of each exam is.
BEST_NOTE = "The paper's best is its best trained reader (the train split, all 18 English or 33 Chinese books)"


def readme_table(found: list[Run] | None = None) -> list[str]:
    """Per exam, our best test figure (``best_test``) against the paper's best, each with its record."""
    found = runs() if found is None else found
    best_row = next(row for row in paper()["rows"] if row["row"] == BEST_ROW)
    rows = ["| test split | openqa's best % (95% CI) | method (parts) | record | the paper's best % |", "|---|---|---|---|---|"]
    for dataset, exam in README_EXAMS:
        run = best_test(dataset, found)
        theirs = f"{best_row['cells'][exam]['test']} ({best_row['models'][exam]})"
        if run is None:
            rows.append(f"| {LABELS[dataset]} | no whole-split record | | | {theirs} |")
            continue
        ci = run.record.get("ci95")
        interval = f" ({ci[0]:.1f}-{ci[1]:.1f})" if ci else ""
        rows.append(f"| {LABELS[dataset]} ({run.record['n']:,} q, {books(dataset)}) | **{run.accuracy:.2f}**{interval} "
                    f"| {describe(run)} | `{run.where}` | {theirs} |")
    return rows


def paper_text(value: float | None, note: str) -> str:
    """A paper cell as the page writes it: the figure (with the reader it names), or why it is missing."""
    if value is None:
        return note
    return f"{value:.1f}" + (f" ({note})" if note else "")


def page_text(found: list[Run] | None = None) -> str:
    """``docs/paper-tables.md`` as the paper's figures and the records make it."""
    found = runs() if found is None else found
    table = paper()
    out = ["# The paper's tables beside ours", "", GENERATED[0], "",
           f"The paper: {table['paper']}. {table['tables']}. {table['transcription']}", "",
           "Ours: each figure is the `accuracy` of the record beside it, over the whole split (records over part of a "
           "split are left out). The paper's rule-based rows take the method's default record (the dev-tuned settings "
           "that ship with openqa); its reader rows take the record of `--method reader` with a reader of the row's "
           "kind (Max-out: `maxout`; BERT-family: `bert`) whose reader learned from the most questions (then: the best "
           "accuracy on the dev questions that chose its checkpoint), never the one with the best test figure. What differs everywhere: this copy of MedQA has 11 of the paper's 18 English books "
           "(all 33 Chinese), and no train split, so the trained readers here learn from dev questions; settings were "
           "chosen on dev and test was run once with them, as in the paper. The paper's Taiwan rows stand beside the "
           "release's English translation (TW-en, read against the English books) and its simplified-Chinese conversion "
           "(TW-zh, the Chinese books), and the questions as released where a record exists: which text the paper's "
           "Taiwan rows read is not stated by the figures' source here (its best Taiwan reader, BioBERT-Large, is an "
           "English model).", "",
           "Figures of the paper not found, by row:", "",
           *(f"- {row['row']}: {row['not_found']}." for row in table["rows"] if "not_found" in row), ""]
    cells = paper_cells(found)
    for exam, name in table["exams"].items():
        out += [f"## {name}", "", "| paper row | ours on | split | the paper % | ours % | record | what differs |",
                "|---|---|---|---|---|---|---|"]
        for cell in (cell for cell in cells if cell.exam == exam):
            ours = cell.run.figure if cell.run else "none"
            where = f"`{cell.run.where}`" if cell.run else ""
            out.append(f"| {cell.row} | {LABELS[cell.dataset]} | {cell.split} | {paper_text(cell.paper, cell.note)} "
                       f"| {ours} | {where} | {cell.differs} |")
        out.append("")
    out += ["## Rows the paper does not have", "",
            "Every other record over a whole split of these exams: the ensembles (fitted on dev), the nearest solved "
            "questions (`bank`), dense and hybrid retrieval, the LLM part and the named ensembles with it, other settings "
            "of the paper's methods, and the 5-option questions.", "",
            "| exam | split | method (parts) | ours % | record |", "|---|---|---|---|---|"]
    out += [f"| {LABELS[run.dataset]} | {run.split} | {describe(run)} | {run.figure} | `{run.where}` |" for run in other_runs(found)]
    out += ["", "## Best per exam", "", f"Best: {BEST_RULE}. {BEST_NOTE}.", "", *readme_table(found), "", GENERATED[1]]
    return "\n".join(out) + "\n"


def write_page() -> None:
    """Write ``docs/paper-tables.md`` from the records."""
    PAGE.write_text(page_text(), encoding="utf-8")
