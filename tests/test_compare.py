"""``openqa compare``: runs matched by question content, accuracy with Wilson intervals, the seeded
paired bootstrap, the exact McNemar test and the disagreements, checked against a case worked out by
hand; runs of different datasets are refused in one line; the bootstrap, drawn in chunks, can be
stopped between them."""

from __future__ import annotations

import hashlib
import json
from typing import Callable

import pytest

from openqa.cancel import cancellable
from openqa.errors import DataError, OpenQAError, UsageError
from openqa.evaluate import metrics
from openqa.evaluate.compare import compare_runs, mcnemar_exact
from openqa.evaluate.metrics import paired_difference, wilson_interval
from tests.helpers import run, write_run


def no_lookup(dataset, split):
    raise AssertionError("every row has a digest")


def test_exact_mcnemar_worked_by_hand():
    assert mcnemar_exact(2, 3) == 1.0  # 2 x (C(5,0) + C(5,1) + C(5,2)) / 2^5 = 2 x 16/32, capped at 1
    assert mcnemar_exact(0, 4) == 0.125  # 2 x C(4,0) / 2^4
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)
    assert mcnemar_exact(0, 0) == 1.0


def test_runs_are_compared_on_their_common_questions_by_content(tmp_path):
    first = write_run(tmp_path, "a", {0, 1, 2, 3, 4, 5})
    second = write_run(tmp_path, "b", {0, 1, 2, 3, 6, 7, 8}, order_seed=3)  # other order, other ids
    record = compare_runs([first, second], no_lookup)
    assert record["common_questions"] == 10 and [r["accuracy"] for r in record["runs"]] == [60.0, 70.0]
    assert record["runs"][0]["ci95"] == list(wilson_interval(6, 10)) and record["runs"][0]["ece"] == 0.1  # |6 - 5| / 10
    # a calibrated method at confidence 0.5 is off by |K - 5| / 10, K ~ Binomial(10, 0.5): P(|K - 5| <= 1) = 0.656, so a median of 0.1
    assert record["runs"][0]["ece_if_calibrated"]["median"] == 0.1
    pair = record["pairs"][0]
    assert pair["difference"] == 10.0 and (pair["only_this_right"], pair["only_first_right"]) == (3, 2)
    assert pair["mcnemar_exact_p"] == 1.0
    assert sorted(pair["disagree"]["only_this_right"]) == ["b-6", "b-7", "b-8"]  # ids differ between runs: matched by digest
    again = compare_runs([first, second], no_lookup)
    assert again["pairs"][0]["ci95"] == pair["ci95"] and pair["ci95"][0] < 10.0 < pair["ci95"][1]  # seeded
    part = write_run(tmp_path, "c", {0, 1}, n=4)  # a run over the first four questions only
    assert compare_runs([first, part], no_lookup)["common_questions"] == 4
    lopsided = compare_runs([write_run(tmp_path, "e", set(), n=40), write_run(tmp_path, "f", set(range(40)), n=40)], no_lookup)
    assert lopsided["pairs"][0]["mcnemar_exact_p"] == pytest.approx(2 / 2**40, rel=1e-3)  # kept to 4 digits, not rounded to 0
    other = write_run(tmp_path, "d", {0}, dataset="mainland")
    with pytest.raises(UsageError, match="runs of different datasets"):
        compare_runs([first, other], no_lookup)


def test_the_paired_interval_worked_by_hand():
    """The bootstrap's percentile interval where its distribution can be written down: the mean of n
    draws of the questions' differences (+1: only the first right, -1: only the second, 0: both or
    neither), at its 2.5th and 97.5th percentiles over 2,000 draws."""
    alike = paired_difference(["a", "b", "c"], [True, False, True], [True, False, True])
    assert (alike["difference"], alike["ci95"]) == (0.0, [0.0, 0.0])  # every difference 0: every draw 0
    always = paired_difference(["a", "b"], [True, True], [False, False])
    assert (always["difference"], always["ci95"]) == (100.0, [100.0, 100.0])
    # differences (+1, 0): a draw of two has mean 0, 50 or 100 points with chances 1/4, 1/2, 1/4, so
    # about 500 of 2,000 draws are 0 and 500 are 100: both percentiles fall on those ends
    half = paired_difference(["a", "b"], [True, False], [False, False])
    assert (half["difference"], half["ci95"], half["only_first_right"], half["only_second_right"]) == (50.0, [0.0, 100.0], 1, 0)
    # differences (+1, +1, +1, -1): the mean of four draws is (2k - 4) / 4, k ~ Binomial(4, 3/4):
    # P(k <= 0) = 1/256 < 2.5% < P(k <= 1) = 13/256, so the 2.5th percentile is k = 1 (-50 points);
    # P(k <= 3) = 175/256 < 97.5%, so the 97.5th is k = 4 (+100)
    mixed = paired_difference(["a", "b", "c", "d"], [True, True, True, False], [False, False, False, True])
    assert (mixed["difference"], mixed["ci95"]) == (50.0, [-50.0, 100.0])
    with pytest.raises(OpenQAError, match="one key and two answers a question, not 1 keys, 2 and 2 answers"):
        paired_difference(["a"], [True, False], [False, False])


def test_eval_and_compare_give_one_interval_for_one_pair(tmp_path):
    """``openqa eval`` (an ensemble against its best part: ``paired_bootstrap`` of its results) and
    ``openqa compare`` of the two runs' prediction files give the same difference and interval: both
    draw the questions in the order of their digests, whatever order eval met them in."""
    from openqa.data import Question
    from openqa.evaluate.metrics import paired_bootstrap, prediction_rows
    from openqa.scorers.base import OptionScores

    questions = [Question(f"q{i}", f"question {i}", {k: f"option {k} of {i}" for k in "ABCD"}, "A", f"option A of {i}")
                 for i in range(60)]

    def results(right: Callable[[int], bool]) -> list[OptionScores]:
        return [OptionScores(q, {"A": float(right(i)), "B": float(not right(i)), "C": -1.0, "D": -1.0})
                for i, q in enumerate(questions)]

    method, part = results(lambda i: i % 2 == 0), results(lambda i: i % 3 == 0)
    for name, run_results in (("method", method), ("part", part)):  # the files eval writes, rows in the dataset's order
        rows = "".join(json.dumps(r) + "\n" for r in prediction_rows(run_results))
        (tmp_path / f"{name}.predictions.jsonl").write_text(rows)
        (tmp_path / f"{name}.json").write_text(json.dumps({"dataset": "us", "split": "test", "method": name, "result_files": {
            f"{name}.predictions.jsonl": hashlib.sha256(rows.encode()).hexdigest()}}))
    printed = paired_bootstrap(method, part)  # what eval records and prints as versus_best_part
    pair = compare_runs([tmp_path / "part.json", tmp_path / "method.json"], no_lookup)["pairs"][0]
    assert (pair["difference"], pair["ci95"], pair["only_this_right"], pair["only_first_right"]) == (
        printed["difference"], printed["ci95"], printed["only_first_right"], printed["only_second_right"]) == (16.67, [0.0, 35.0], 20, 10)
    in_dataset_order = paired_difference([f"{i:02d}" for i in range(60)], [i % 2 == 0 for i in range(60)], [i % 3 == 0 for i in range(60)])
    assert in_dataset_order["ci95"] != printed["ci95"]  # drawn in the order eval met them, the two intervals would differ


@pytest.mark.spawns
def test_the_command_prints_tables_json_and_writes_markdown(tmp_path):
    first, second = write_run(tmp_path, "a", {0, 1, 2}), write_run(tmp_path, "b", {0, 1, 2, 3, 4, 5, 6})
    done = run("compare", str(first), str(tmp_path / "b.predictions.jsonl"), "--output", str(tmp_path / "cmp.md"))
    assert done.returncode == 0, done.stderr
    assert "| b.json | a.json | +40.00 (" in done.stdout and "0.125 |" in done.stdout
    assert (tmp_path / "cmp.md").read_text() == done.stdout and json.loads((tmp_path / "cmp.md.json").read_text())["n"] == 10
    as_json = json.loads(run("compare", str(first), str(second), "--json").stdout)
    assert as_json["pairs"][0]["mcnemar_exact_p"] == 0.125 and as_json["openqa_version"]
    alone = run("compare", str(first))
    assert alone.returncode == 2 and "at least two runs" in alone.stderr


def test_the_bootstrap_draws_in_chunks_with_the_figures_of_one_matrix(monkeypatch):
    import numpy as np

    from openqa.evaluate import metrics

    first = [i % 3 != 0 for i in range(37)]
    second = [i % 5 != 0 for i in range(37)]
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)  # the whole 2000 x n matrix, as before
    draws = np.random.default_rng(metrics.BOOTSTRAP_SEED).integers(0, 37, size=(metrics.BOOTSTRAP_ROUNDS, 37))
    means = 100 * (a - b)[draws].mean(axis=1)
    whole = [round(float(np.percentile(means, 2.5)), 2), round(float(np.percentile(means, 97.5)), 2)]
    keys = [f"q{i:02d}" for i in range(37)]  # in the order of the questions: drawn as given
    assert metrics.paired_difference(keys, first, second)["ci95"] == whole
    held = []
    real_rng = np.random.default_rng

    class Counted:  # the generator, recording how many draws each call holds
        def __init__(self, seed):
            self.rng = real_rng(seed)

        def integers(self, low, high, size):
            held.append(int(np.prod(size)))
            return self.rng.integers(low, high, size=size)

    monkeypatch.setattr(metrics, "BOOTSTRAP_CHUNK", 37 * 7)  # 7 resamples at a time, the last chunk shorter
    monkeypatch.setattr(np.random, "default_rng", Counted)
    assert metrics.paired_difference(keys, first, second)["ci95"] == whole
    assert max(held) == 37 * 7 and sum(held) == 37 * metrics.BOOTSTRAP_ROUNDS


@pytest.mark.parametrize("change, message", [
    ({"probabilities": {"A": float("nan"), "B": 0.5}}, "the probability of A is nan, not a number from 0 to 1"),
    ({"probabilities": {"A": 1.5, "B": 0.5}}, "the probability of A is 1.5, not a number from 0 to 1"),
    ({"probabilities": {"A": 0.5, "B": 0.5}, "prediction": "Z", "answer": "Z"}, "the prediction 'Z' is not one of the options (A, B)"),
    ({"confidence": float("inf")}, '"confidence" is inf, not a number from 0 to 1 or null'),
    ({"correct": "no"}, '"correct" is \'no\', not true or false'),
    ({"correct": 10 ** 400}, '"correct" is 10000000000000000000... (401 characters), not true or false'),
    ({"prediction": "B", "answer": "A", "correct": True}, '"correct" is true but the prediction is \'B\' and the answer \'A\''),
])
def test_a_row_whose_figures_cannot_be_counted_is_refused_at_its_line(tmp_path, change, message):
    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 2})
    predictions = tmp_path / "b.predictions.jsonl"
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    rows[3] = {**rows[3], "probabilities": {"A": 0.7, "B": 0.3}, **change}
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as raised:
        compare_runs([first, second], no_lookup)
    assert str(raised.value) == f"{predictions}:4: {message}: rerun openqa eval"


@pytest.mark.spawns
def test_compare_says_a_nan_probability_in_one_line(tmp_path):
    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 2})
    predictions = tmp_path / "b.predictions.jsonl"
    lines = predictions.read_text().splitlines()
    lines[1] = lines[1][:-1] + ', "probabilities": {"A": NaN, "B": 0.5}}'
    predictions.write_text("\n".join(lines) + "\n")
    done = run("compare", str(first), str(second))
    assert done.returncode == 2 and done.stderr == f"openqa: error: {predictions}:2: the probability of A is nan, not a number " \
        "from 0 to 1: rerun openqa eval\n", done.stderr


def test_shipped_compact_predictions_compare_and_browse_as_the_predictions_do(tmp_path):
    """A clean clone has no .predictions.jsonl, only the gzipped compact copy the repository ships
    (``scripts/maintenance/ship_predictions.py``): compare and the results page read it with the same figures."""
    import subprocess
    import sys
    from pathlib import Path

    from openqa.evaluate.browse import run_questions

    script = Path(__file__).resolve().parents[1] / "scripts" / "maintenance" / "ship_predictions.py"
    first, second = write_run(tmp_path, "a", {0, 1, 2, 3, 4, 5}), write_run(tmp_path, "b", {0, 1, 2, 3, 6, 7, 8})
    before = compare_runs([first, second], no_lookup)
    questions = run_questions(tmp_path, "a")
    done = subprocess.run([sys.executable, str(script), str(first), str(second)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for name in ("a", "b"):
        (tmp_path / f"{name}.predictions.jsonl").unlink()
    assert compare_runs([first, second], no_lookup) == before
    assert run_questions(tmp_path, "a") == questions
    (tmp_path / "a.predictions.jsonl.gz").write_bytes(b"\x1f\x8b damaged")
    with pytest.raises(DataError, match="cannot read as gzip"):
        compare_runs([first, second], no_lookup)


def test_ship_part_writes_a_readers_scores_as_an_ensemble_part_and_refuses_a_run_without_them(tmp_path):
    """``ship_predictions.py --part`` keeps each row's id, digest, scores and scale, in order and unrounded
    (what ``--predictions NAME=FILE`` reads); a run whose rows have no scores makes no part."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "maintenance" / "ship_predictions.py"
    record = write_run(tmp_path, "reader", {0, 2})
    predictions = tmp_path / "reader.predictions.jsonl"
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    for i, row in enumerate(rows):
        row.update(scores={"A": -0.123456789 * i, "B": 0.5}, scale="logits")
    predictions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = subprocess.run([sys.executable, str(script), "--part", str(record)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    part = [json.loads(line) for line in (tmp_path / "reader.part.jsonl").read_text().splitlines()]
    assert part == [{"qid": r["qid"], "digest": r["digest"], "scores": r["scores"], "scale": "logits"} for r in rows]
    bare = write_run(tmp_path, "bare", {0})
    done = subprocess.run([sys.executable, str(script), "--part", str(bare)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "have no scores, scale" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "bare.part.jsonl").exists()


def test_a_run_of_a_question_file_is_compared_with_a_dataset_run_on_their_common_questions(tmp_path):
    """``eval --questions FILE`` records its file's name as the dataset and "file" as the split: it may hold
    a dataset's questions, so it is compared with that dataset's run on what they share (by content)."""
    mine = write_run(tmp_path, "mine", {0, 1}, dataset="five", n=5)
    record = json.loads(mine.read_text())
    mine.write_text(json.dumps({**record, "split": "file"}))
    full = write_run(tmp_path, "full", {0, 1, 2})
    assert compare_runs([mine, full], no_lookup)["common_questions"] == 5


def test_the_bootstrap_passes_a_checkpoint_between_chunks_and_draws_the_same_in_any_chunks(monkeypatch):
    keys, first, second = [f"q{i:03d}" for i in range(100)], [i % 2 == 0 for i in range(100)], [i % 3 == 0 for i in range(100)]
    whole = paired_difference(keys, first, second)  # 2,000 resamples of 100 questions: one chunk
    monkeypatch.setattr(metrics, "BOOTSTRAP_CHUNK", 7 * 100)  # 7 resamples a chunk: 286 chunks
    checks: list[int] = []
    with cancellable(lambda: checks.append(1)):
        assert paired_difference(keys, first, second) == whole
    assert len(checks) == 286  # ceil(2000 / 7)

    def third_stops() -> None:
        checks.append(1)
        if len(checks) == 3:
            raise RuntimeError("stopped")

    checks.clear()
    with cancellable(third_stops), pytest.raises(RuntimeError, match="stopped"):
        paired_difference(keys, first, second)
    assert len(checks) == 3  # stopped before its third chunk


def test_two_runs_of_question_files_are_compared(tmp_path):
    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 1, 2})
    for path in (first, second):  # as eval --questions writes them: the file's name, split "file"
        path.write_text(json.dumps({**json.loads(path.read_text()), "dataset": "mine", "split": "file"}))
    record = compare_runs([first, second], no_lookup)  # a KeyError before (no named dataset to report)
    assert (record["dataset"], record["split"], record["common_questions"]) == ("mine", "file", 10)
    assert record["pairs"][0]["difference"] == 10.0


def test_a_run_given_twice_is_refused_however_it_is_named(tmp_path):
    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 2})
    (tmp_path / "alias.json").symlink_to(second)
    (tmp_path / "alias.predictions.jsonl").symlink_to(tmp_path / "b.predictions.jsonl")
    for again in (second, tmp_path / "b.predictions.jsonl", tmp_path / "alias.json"):
        with pytest.raises(UsageError, match="is given more than once: compare different runs"):
            compare_runs([first, second, again], no_lookup)


@pytest.mark.parametrize("change, message", [
    (lambda record, rows: record.update(dataset={"a": 1}), "not an eval record openqa wrote (its dataset is not a name)"),
    (lambda record, rows: record.update(split=["test"]), "not an eval record openqa wrote (its split is not a name)"),
    (lambda record, rows: rows[2].update(digest=["d2"]), ':3: "digest" is [\'d2\'], not text: rerun openqa eval'),
    (lambda record, rows: rows.append({**rows[1], "prediction": "B", "correct": True}),  # row 2: predicted A, answer B
     ":11: question digest 'd1' is predicted again, otherwise than on line 2: keep one row per question"),
])
def test_a_run_whose_names_or_rows_cannot_be_matched_is_refused_in_one_line(tmp_path, change, message):
    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 2})
    record = json.loads(second.read_text())
    predictions = tmp_path / "b.predictions.jsonl"
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    change(record, rows)
    second.write_text(json.dumps(record))
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as raised:  # a TypeError (unhashable) or a silent last row before
        compare_runs([first, second], no_lookup)
    assert str(raised.value).endswith(message) and "\n" not in str(raised.value)


@pytest.mark.parametrize("name, text, why", [
    ("empty", "{}", "no dataset"),
    ("no-files", '{"result_files": {}}', "no dataset"),
    ("list", "[1, 2]", "a JSON list, not an object"),
    ("cmp.md", None, "no result_files: the files an eval writes with its record, by digest"),
])
def test_json_that_is_no_eval_record_is_refused_by_both_readers(tmp_path, name, text, why):
    """NL2: compare and read_result_set take only a record an eval wrote, never ``{}``, a record of no
    files nor compare's own JSON (beside ``cmp.md``), whose dataset, split and method look like a run's."""
    from openqa.errors import OpenQAError
    from openqa.evaluate.results import read_result_set

    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 2})
    (tmp_path / f"{name}.json").write_text(text or json.dumps(compare_runs([first, second], no_lookup)))  # compare's own
    record = tmp_path / f"{name}.json"
    (tmp_path / f"{name}.predictions.jsonl").write_text((tmp_path / "b.predictions.jsonl").read_text())
    with pytest.raises(DataError) as raised:
        compare_runs([first, record], no_lookup)
    assert str(raised.value) == f"{record}: not an eval record openqa wrote ({why})"
    with pytest.raises(OpenQAError) as raised:
        read_result_set(record)
    assert str(raised.value) == f"{record}: not a result summary openqa wrote ({why})"
    assert read_result_set(first)["method"] == "a"


def test_a_question_asked_twice_and_answered_alike_is_read_once(tmp_path):
    first, second = write_run(tmp_path, "a", {0, 1}), write_run(tmp_path, "b", {0, 2})
    predictions = tmp_path / "b.predictions.jsonl"
    predictions.write_text(predictions.read_text() + predictions.read_text().splitlines()[0] + "\n")
    assert compare_runs([first, second], no_lookup)["runs"][1]["questions_in_run"] == 10
