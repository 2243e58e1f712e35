"""Two or more evaluation runs compared question by question (``openqa compare``).

A run is an eval record (``<stem>.json``) or its predictions file (``<stem>.predictions.jsonl``).
Runs are matched on their common questions by content (each prediction row's ``digest``, the
question's text and lettered options; a row written before digests is looked up in its dataset's
split by id), never by file name or position; runs over different datasets are refused. For each
run: accuracy on the common questions with its Wilson interval and its calibration error; for each
later run against the first: the paired bootstrap interval of the difference (seeded), the exact
McNemar test on the questions where exactly one is right, and those questions counted both ways.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from openqa.cancel import checkpoint
from openqa.data import QUESTION_FILE
from openqa.errors import DataError, UsageError
from openqa.evaluate.calibration import calibrated_ece, calibration_error
from openqa.evaluate.metrics import paired_difference, wilson_interval
from openqa.evaluate.results import not_an_eval_record, output_target, refuse_run_files
from openqa.jsonl import decode, decode_at, numbered_lines, text_line
from openqa.version import version_record

#: The longest predictions row read.
MAX_ROW_BYTES = 1 << 22
#: Questions where two runs disagree that a comparison lists (the counts cover all).
LISTED = 50


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """The two-sided exact McNemar p-value: of the questions exactly one run gets right, how unlikely
    a split at least this uneven is when each is equally likely to be the one (binomial, p = 1/2)."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    low = min(only_first, only_second)
    tail: float = sum(math.comb(n, k) for k in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


def prediction_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of an eval's predictions file with where each stands (``file:line``); a line that
    is not a prediction row is a one-line error."""
    for number, raw in numbered_lines(path, MAX_ROW_BYTES, "a predictions file"):
        checkpoint()  # a server's request reading it stops here once it is no longer wanted
        where = f"{path}:{number}"
        line = text_line(where, raw)
        if not line.strip():
            continue
        row = decode_at(where, line)
        if not isinstance(row, dict) or "correct" not in row:
            raise DataError(f"{where}: not a prediction row (no 'correct')")
        check_row(where, row)
        yield where, row


def _shown(value: Any) -> str:
    """A value as an error shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"


def _probability(value: Any) -> bool:
    """Whether ``value`` is a probability: a finite number from 0 to 1 (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


def check_row(where: str, row: dict[str, Any]) -> None:
    """A prediction row whose figures can be counted, else a one-line error at ``where``: ``correct``
    true or false (and what its prediction and answer say, where it has both); each probability
    and the confidence a number from 0 to 1 (NaN is none); the prediction one of the row's options."""
    correct, prediction = row["correct"], row.get("prediction")
    if not isinstance(correct, bool):
        raise DataError(f"{where}: \"correct\" is {_shown(correct)}, not true or false: rerun openqa eval")
    probabilities, scores = row.get("probabilities"), row.get("scores")
    if probabilities is not None:
        if not isinstance(probabilities, dict):
            raise DataError(f"{where}: \"probabilities\" is {_shown(probabilities)}, not an object of letters: rerun openqa eval")
        bad = next(((k, v) for k, v in probabilities.items() if not _probability(v)), None)
        if bad is not None:
            raise DataError(f"{where}: the probability of {bad[0]} is {_shown(bad[1])}, not a number from 0 to 1: "
                            "rerun openqa eval")
    if row.get("confidence") is not None and not _probability(row["confidence"]):
        raise DataError(f"{where}: \"confidence\" is {_shown(row['confidence'])}, not a number from 0 to 1 or null: "
                        "rerun openqa eval")
    options = next((list(x) for x in (probabilities, scores) if isinstance(x, dict) and x), None)
    if prediction is not None and (not isinstance(prediction, str) or (options is not None and prediction not in options)):
        listed = f" ({', '.join(map(str, options))})" if options is not None else ""
        raise DataError(f"{where}: the prediction {_shown(prediction)} is not one of the options{listed}: rerun openqa eval")
    if "answer" in row and "prediction" in row and correct != (prediction == row["answer"]):  # as openqa eval counts
        raise DataError(f"{where}: \"correct\" is {str(correct).lower()} but the prediction is {_shown(prediction)} "
                        f"and the answer {_shown(row['answer'])}: rerun openqa eval")


#: A run's predictions as ``openqa eval`` writes them, and the compact gzipped copy a repository
#: ships in their place (``scripts/maintenance/ship_predictions.py``): read where the first is absent.
PREDICTIONS = ".predictions.jsonl"
SHIPPED = ".predictions.jsonl.gz"


def predictions_of(record: Path) -> Path:
    """The predictions file of the record ``<stem>.json``: ``<stem>.predictions.jsonl``, else its
    shipped copy ``<stem>.predictions.jsonl.gz`` where only that is there."""
    written = record.with_name(record.name.removesuffix(".json") + PREDICTIONS)
    shipped = written.with_name(written.name + ".gz")
    return shipped if not written.exists() and shipped.is_file() else written


def run_paths(given: Path) -> tuple[Path, Path]:
    """A run's record and predictions file, from either of them."""
    name = given.name
    for suffix in (PREDICTIONS, SHIPPED):
        if name.endswith(suffix):
            return given.with_name(name.removesuffix(suffix) + ".json"), given
    if name.endswith(".json"):
        return given, predictions_of(given)
    raise UsageError(f"{given}: give an eval record (.json) or its predictions file (.predictions.jsonl)")


def check_output(output: Path, runs: Sequence[Path]) -> None:
    """Refuse, in one line before any work, an ``openqa compare --output`` that is a folder or would
    replace one of the runs it compares (its record or predictions file, links followed), as itself
    or as the JSON written beside it, or another eval run's record or files (``refuse_run_files``).
    Its own earlier output may be replaced."""
    target, regular = output_target(output)
    written = [target, target.with_name(target.name + ".json")]
    inputs = {path.resolve(): path for run in runs for path in run_paths(Path(run))}
    for path in written:
        if path.resolve() in inputs:
            raise UsageError(f"--output {output} would replace {inputs[path.resolve()]}, one of the runs compared: "
                             "name another file")
    if regular:
        refuse_run_files(written, output)


def read_run(given: Path, digests_of: Callable[[str, str], dict[str, str]]) -> dict[str, Any]:
    """One run: its record's dataset, split, method and file, and its rows by question digest
    (``digests_of(dataset, split)`` gives qid -> digest for rows written before digests)."""
    record_path, predictions = run_paths(Path(given))
    try:
        record = decode(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{record_path}: not a readable eval record ({exc})") from None
    why = not_an_eval_record(record)
    if why is not None:
        raise DataError(f"{record_path}: not an eval record openqa wrote ({why})")
    rows: dict[str, dict[str, Any]] = {}
    lines: dict[str, str] = {}  # where each question's row stands
    lookup: dict[str, str] | None = None
    for where, row in prediction_rows(predictions):
        digest = row.get("digest")
        if digest is None:
            lookup = lookup if lookup is not None else digests_of(str(record["dataset"]), str(record.get("split")))
            digest = lookup.get(str(row.get("qid")))
            if digest is None:
                raise DataError(f"{where}: question {row.get('qid')!r} has no digest and is not in "
                                f"{record['dataset']} {record.get('split')}: rerun openqa eval to write digests")
        elif not isinstance(digest, str):
            raise DataError(f"{where}: \"digest\" is {_shown(digest)}, not text: rerun openqa eval")
        if digest in rows and _counted(rows[digest]) != _counted(row):  # a question asked twice, answered alike, is read once
            raise DataError(f"{where}: question digest {_shown(digest)} is predicted again, otherwise than on line "
                            f"{lines[digest].rsplit(':', 1)[1]}: keep one row per question")
        rows[digest], lines[digest] = row, where
    if not rows:
        raise DataError(f"{predictions}: no predictions")
    label = str(record.get("method")) + (f" ({record['variant']})" if record.get("variant") else "")
    return {"file": record_path.name, "label": label, "dataset": record["dataset"], "split": record.get("split"),
            "method": record.get("method"), "rows": rows}


def _counted(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a comparison counts of a prediction row (two rows of one question must agree on it)."""
    return row["correct"], row.get("prediction"), row.get("confidence"), row.get("probabilities")


def _confidence(value: Any) -> bool:
    """Whether a prediction row's confidence can be compared: none, or a finite number."""
    return value is None or (isinstance(value, (int, float)) and math.isfinite(value))


def compare_runs(paths: Sequence[Path], digests_of: Callable[[str, str], dict[str, str]]) -> dict[str, Any]:
    """The comparison record of the runs ``paths`` (at least two) on their common questions."""
    if len(paths) < 2:
        raise UsageError("give at least two runs to compare")
    records = [run_paths(Path(p))[0].resolve() for p in paths]  # a run named twice (its record, its predictions, a link)
    twice = next((Path(p).name for p, where in zip(paths, records) if records.count(where) > 1), None)
    if twice is not None:
        raise UsageError(f"run {twice!r} is given more than once: compare different runs")
    runs = [read_run(Path(p), digests_of) for p in paths]
    # a run of a question file (``eval --questions``; its split is "file") may hold any dataset's
    # questions: it is compared with others on the questions they share, matched by content
    datasets = {(r["dataset"], r["split"]) for r in runs if r["split"] != QUESTION_FILE}
    if len(datasets) > 1:
        shown = ", ".join(f"{r['file']}: {r['dataset']} {r['split']}" for r in runs)
        raise UsageError(f"runs of different datasets cannot be compared question by question ({shown})")
    common = sorted(set.intersection(*(set(r["rows"]) for r in runs)))
    if not common:
        raise UsageError("the runs share no question")
    for run in runs:
        bad = next((run["rows"][d].get("qid") for d in common if not _confidence(run["rows"][d].get("confidence"))), None)
        if bad is not None:
            raise DataError(f"{run['file']}: question {bad!r} has a confidence that is not a number: rerun openqa eval")
    correct = [np.array([bool(r["rows"][d]["correct"]) for d in common]) for r in runs]
    summaries = []
    for run, right in zip(runs, correct):
        conf = np.array([float(run["rows"][d].get("confidence") or 0.0) for d in common])
        has_confidence = all(run["rows"][d].get("confidence") is not None for d in common)
        summaries.append({
            "run": run["file"], "method": run["label"], "n": len(common), "questions_in_run": len(run["rows"]),
            "accuracy": round(100 * float(right.mean()), 2), "ci95": list(wilson_interval(float(right.sum()), len(common))),
            "ece": round(calibration_error(conf, right), 4) if has_confidence else None,
            "ece_if_calibrated": calibrated_ece(conf) if has_confidence else None,
        })
    pairs = []
    for run, right in zip(runs[1:], correct[1:]):
        diff = paired_difference(common, right.tolist(), correct[0].tolist())
        only_this = [d for d, a, b in zip(common, right, correct[0]) if a and not b]
        only_first = [d for d, a, b in zip(common, right, correct[0]) if b and not a]
        pairs.append({
            "run": run["file"], "against": runs[0]["file"], "difference": diff["difference"], "ci95": diff["ci95"],
            "interval": diff["interval"], "only_this_right": len(only_this), "only_first_right": len(only_first),
            "mcnemar_exact_p": float(f"{mcnemar_exact(len(only_this), len(only_first)):.4g}"),  # a tiny p is not 0
            "disagree": {"only_this_right": [run["rows"][d].get("qid") for d in only_this[:LISTED]],
                         "only_first_right": [run["rows"][d].get("qid") for d in only_first[:LISTED]]},
        })
    dataset, split = datasets.pop() if datasets else (runs[0]["dataset"], QUESTION_FILE)  # runs of question files alone
    return {"dataset": dataset, "split": split, "method": "compare", "n": len(common), "accuracy": summaries[0]["accuracy"],
            "common_questions": len(common), "matched_by": "question content (text and lettered options)",
            "runs": summaries, "pairs": pairs, **version_record()}


def compare_markdown(record: dict[str, Any]) -> str:
    """The comparison as Markdown tables (what ``openqa compare`` prints and writes as ``.md``)."""
    lines = [f"# {record['dataset']} {record['split']}: {len(record['runs'])} runs on {record['common_questions']} common questions",
             "", "| run | method | accuracy % (95% CI) | ECE (a calibrated method's, 95%) | questions in the run |",
             "|---|---|---|---|---|"]
    for s in record["runs"]:
        calibrated = s.get("ece_if_calibrated")  # none in a record made before it was reported
        ece = f"{s['ece']:.3f}" if s["ece"] is not None else "-"
        ece += f" ({calibrated['ci95'][0]:.3f}-{calibrated['ci95'][1]:.3f})" if calibrated else ""
        lines.append(f"| {s['run']} | {s['method']} | {s['accuracy']:.2f} ({s['ci95'][0]:.1f}-{s['ci95'][1]:.1f}) | {ece} "
                     f"| {s['questions_in_run']} |")
    lines += ["", "| run | against | difference (points, 95% CI) | only this right | only the first right | McNemar exact p |",
              "|---|---|---|---|---|---|"]
    for p in record["pairs"]:
        lines.append(f"| {p['run']} | {p['against']} | {p['difference']:+.2f} ({p['ci95'][0]:+.2f} to {p['ci95'][1]:+.2f}) "
                     f"| {p['only_this_right']} | {p['only_first_right']} | {p['mcnemar_exact_p']:.4g} |")
    lines += ["", f"Intervals: {record['pairs'][0]['interval']}; accuracy intervals: Wilson 95%."]
    return "\n".join(lines) + "\n"
