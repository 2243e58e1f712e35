"""Cross-fitting readers on dev (``openqa train --cross-fit K``): folds by content that are disjoint and
cover dev, out-of-fold predictions that never come from a reader that saw the question, and the
record and predictions file an ensemble reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import pytest
import torch

from openqa.data import Question, load_questions
from openqa.errors import OpenQAError
from openqa.readers.base import Example
from openqa.readers.crossfit import assign_folds, content_order, cross_fit, fold_of, out_of_fold_rows
from openqa.readers.maxout import MaxoutReader
from openqa.readers.registry import load_reader
from openqa.readers.train import TrainConfig
from openqa.scorers.precomputed import PrecomputedScorer
from tests.helpers import QUESTIONS, loc, make_data_dir, run
from tests.test_readers import maxout_reader, toy

CONFIG = TrainConfig(epochs=2, lr=5e-3, batch_size=4, effective_batch=4, warmup=0.0)


def questions(n: int) -> list[Question]:
    """``n`` distinct questions (``toy`` repeats some: it has 24 option orders)."""
    return [replace(e.question, question=f"which word {i}?") for i, e in enumerate(toy(n))]


def test_folds_are_disjoint_and_cover_the_questions():
    qs = questions(60)
    folds = assign_folds(qs, 5)
    members = [i for fold in folds for i in fold]
    assert sorted(members) == list(range(60))  # every question once: disjoint, and they cover all
    assert all(fold for fold in folds)
    assert [fold_of(qs[i], 5) for i in folds[2]] == [2] * len(folds[2])
    with pytest.raises(OpenQAError, match="at least 2 folds"):
        assign_folds(qs, 1)
    with pytest.raises(OpenQAError, match="fold of 50 empty"):
        assign_folds(qs, 50)


def test_a_questions_fold_depends_on_its_content_only():
    qs = questions(40)
    folds = [fold_of(q, 5) for q in qs]
    renamed = [replace(q, qid=f"other-file-{i}", meta_info="x") for i, q in enumerate(reversed(qs))]
    assert [fold_of(q, 5) for q in renamed] == folds[::-1]  # ids, order and file never move it
    assert [fold_of(q, 5) for q in qs[10:]] == folds[10:]  # nor the other questions
    assert len({fold_of(replace(qs[0], question=f"which term {i}?"), 5) for i in range(30)}) > 1  # the text does
    assert [fold_of(q, 5, seed=14) for q in qs] != folds  # and the seed
    first = content_order(range(40), qs)
    assert content_order(range(40), list(reversed(qs)))[:5] == [39 - i for i in first[:5]]  # content, not position


class Spy(MaxoutReader):
    """A Max-out reader that notes the questions it trains on and those it scores while not training."""

    trained: set[str]
    scored: set[str]

    def loss(self, batch: Sequence[Example]) -> torch.Tensor:
        self.trained.update(e.question.digest() for e in batch)
        return super().loss(batch)

    def logits(self, batch: Sequence[Example]) -> torch.Tensor:
        if not self.model.training:
            self.scored.update(e.question.digest() for e in batch)
        return super().logits(batch)


def test_out_of_fold_predictions_never_come_from_a_reader_that_saw_the_question(tmp_path):
    data = toy(30)  # with repeated questions: copies share a fold, so none is on both sides
    spies: list[Spy] = []

    def make() -> Spy:
        torch.manual_seed(0)
        base = maxout_reader()
        spy = Spy(base.vocab, base.model.embed.weight.detach().numpy().copy(), "en")
        spy.trained, spy.scored = set(), set()
        spies.append(spy)
        return spy

    result = cross_fit(make, data, 3, CONFIG, tmp_path / "folds", {"dataset": "toy"}, load_reader)
    assert len(spies) == 3 and result["n"] == 30
    for spy in spies:
        assert spy.trained and spy.scored and not spy.trained & spy.scored
    assert set().union(*(s.scored for s in spies)) == {e.question.digest() for e in data}
    rows = out_of_fold_rows(result, data)
    assert [r["fold"] for r in rows] == [fold_of(e.question, 3) + 1 for e in data]
    fold_sizes = {f["fold"]: (f["questions"], f["train_questions"]) for f in result["folds"]}
    assert all(held + trained == 30 for held, trained in fold_sizes.values())
    assert set(result["accuracy_by_epoch"]) == {1, 2} and result["epochs_chosen"] in (1, 2)
    assert round(result["accuracy"], 2) == result["accuracy_by_epoch"][result["epochs_chosen"]]
    assert result["correct"] == round(result["accuracy"] * 30 / 100)
    # a rerun resumes every fold from its last epoch and gives the same predictions
    again = cross_fit(make, data, 3, CONFIG, tmp_path / "folds", {"dataset": "toy"}, load_reader)
    assert again["scores"] == result["scores"] and len(spies) == 6 and not any(s.trained for s in spies[3:])


def test_every_folds_reader_starts_from_the_word_vectors_not_an_earlier_folds_weights(tmp_path):
    """The readers of all folds are made from one array of word vectors (as the word2vec index holds
    it): training one must not write into it. A reader's embedding shared that memory, so each fold
    started from the weights the folds before had trained, on its own held-out questions (US dev:
    held-out accuracy 29.9, 40.2, 49.8, 56.3, 75.4% fold by fold)."""
    base = maxout_reader()
    vectors = base.model.embed.weight.detach().numpy().copy()  # one array for every reader, as the index's
    original = vectors.copy()
    starts = []

    def make() -> MaxoutReader:
        torch.manual_seed(0)
        reader = MaxoutReader(base.vocab, vectors, "en")
        starts.append(reader.model.embed.weight.detach().clone())
        return reader

    cross_fit(make, toy(30), 3, CONFIG, tmp_path / "folds", {"dataset": "toy"}, load_reader)
    assert len(starts) == 3 and all(torch.equal(start, starts[0]) for start in starts)
    assert (vectors == original).all()


def test_a_learning_curve_trains_on_nested_content_subsets(tmp_path):
    data = toy(30)
    small = cross_fit(maxout_reader, data, 3, CONFIG, tmp_path / "a", {}, load_reader, folds_run=[1], train_limit=5)
    assert [(f["fold"], f["train_questions"]) for f in small["folds"]] == [(1, 5)]
    assert small["n"] == len(assign_folds([e.question for e in data], 3)[0])
    with pytest.raises(OpenQAError, match="other settings"):  # another size never resumes this one's runs
        cross_fit(maxout_reader, data, 3, CONFIG, tmp_path / "a", {}, load_reader, folds_run=[1], train_limit=6)
    with pytest.raises(OpenQAError, match="among 1..3"):
        cross_fit(maxout_reader, data, 3, CONFIG, tmp_path / "b", {}, load_reader, folds_run=[4])


def cross_fit_site(tmp_path):
    """The fixture site with twelve dev questions (the two of ``QUESTIONS`` reworded), its custom and
    word2vec indexes built."""
    data = make_data_dir(tmp_path)
    rows = [{**q, "question": f"Case {i}: {q['question']}"} for i in range(6) for q in QUESTIONS]
    (data / "questions" / "US" / "4_options" / "phrases_no_exclude_dev.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    site = (tmp_path, data, tmp_path / "indexes")
    for engine in ("custom", "word2vec"):
        result = run("index", "--lang", "en", "--engine", engine, *loc(site))
        assert result.returncode == 0, result.stderr
    return site


@pytest.mark.spawns
def test_train_cross_fit_writes_the_record_predictions_and_a_checkpoint(tmp_path):
    site = cross_fit_site(tmp_path)
    results, out = tmp_path / "results", tmp_path / "run"
    result = run("train", "--reader", "maxout", "--dataset", "us", "--cross-fit", "3", "--epochs", "2", "--batch-size", "4",
                 "--effective-batch", "4", "--top-n", "1", "--output", str(out), "--results", str(results), *loc(site))
    assert result.returncode == 0, result.stderr
    assert "out-of-fold accuracy on 12 dev questions" in result.stdout
    record = json.loads((results / "train-maxout-us-crossfit3.json").read_text())
    assert {"dataset", "split", "method", "n", "accuracy", "correct", "command", "openqa_version", "protocol",
            "cross_fit", "final", "config"} <= set(record)
    assert (record["dataset"], record["split"], record["method"], record["n"]) == ("us", "dev", "reader", 12)
    assert 0 <= record["accuracy"] <= 100 and record["command"].startswith("openqa train")
    fits = record["cross_fit"]
    assert (fits["k"], fits["seed"], fits["questions"], fits["folds_run"]) == (3, 13, 12, [1, 2, 3])
    assert sum(f["questions"] for f in fits["folds"]) == 12
    assert all(f["train_questions"] == 12 - f["questions"] and f["seconds"] > 0 for f in fits["folds"])
    assert record["protocol"].startswith("--cross-fit 3: dev cut into 3 folds by content")
    assert record["final"]["train_questions"] == 12 and record["final"]["epochs"] == fits["epochs_chosen"]
    assert (out / "best" / "reader.json").is_file() and (out / "folds" / "fold-3" / "heldout.json").is_file()
    # the out-of-fold predictions are a part an ensemble reads: every dev question, by content
    dev = load_questions("us", "dev", site[1])
    scored = PrecomputedScorer(results / record["files"]["predictions"], "maxout").score(dev, progress=False)
    assert len(scored) == 12 and all(len(s.scores) == 4 for s in scored)
    # whether an ensemble keeps it is judged on dev, beside the exam's parts and, with --with bank, the bank
    script = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "part_choice.py"
    judged = subprocess.run([sys.executable, str(script), "--dataset", "us", "--part", f"maxout={results / record['files']['predictions']}",
                             "--with", "bank", "--index-dir", str(site[2]), "--results", str(tmp_path / "studies")],
                            capture_output=True, text=True, env={**os.environ, "OPENQA_DATA": str(site[1])}, timeout=600)
    assert judged.returncode == 0, judged.stderr
    choice = json.loads((tmp_path / "studies" / "part-choice-maxout-bank-us-dev.json").read_text())
    assert choice["parts"][-1] == "bank" and choice["part"] == "maxout" and choice["n"] == 12
    assert choice["keep_part"] == (choice["with_part"]["log_likelihood"] > choice["without_part"]["log_likelihood"])
    assert "--results FOLDER" in choice["command"] and "--with bank" in choice["command"]
    # the checkpoint trained on all of dev scores test
    result = run("eval", "--dataset", "us", "--split", "test", "--method", "reader", "--model", str(out), "--json",
                 "--output", str(tmp_path / "eval"), *loc(site))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n"] == 2


@pytest.mark.spawns
def test_cross_fit_and_a_train_split_are_refused_together(tmp_path):
    site = (tmp_path, make_data_dir(tmp_path), tmp_path / "indexes")
    result = run("train", "--reader", "maxout", "--dataset", "us", "--cross-fit", "3", "--train-split", "dev:0.5",
                 *loc(site))
    assert result.returncode == 2 and "not both" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.spawns
def test_the_learning_curve_script_on_the_fixture(tmp_path):
    site = cross_fit_site(tmp_path)
    script = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "reader_curve.py"
    done = subprocess.run([sys.executable, str(script), "--dataset", "us", "--sizes", "all,4", "--folds", "3", "--epochs", "1",
                           "--batch-size", "4", "--effective-batch", "4", "--top-n", "1", "--index-dir", str(site[2]),
                           "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")],
                          capture_output=True, text=True, env={**os.environ, "OPENQA_DATA": str(site[1])}, timeout=600)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "results" / "reader-curve-us.json").read_text())
    assert record["complete"] and [r["size"] for r in record["sizes"]] == [4, "all"]  # smallest first
    held = record["held_out_questions"]
    assert [r["train_questions"] for r in record["sizes"]] == [4, 12 - held] and all(r["n"] == held for r in record["sizes"])
    assert all(0 <= r["accuracy"] <= 100 and r["seconds"] >= 0 for r in record["sizes"])  # (a tiny fixture trains in under 0.05 s)
    assert {"dataset", "split", "method", "n", "accuracy", "command"} <= set(record)
