"""Many questions scored at once (``Solver.score_all``, ``ScoredQuestions``), an ensemble's parts
scored once and judged on held-out folds (``score_parts``, ``CrossValidation``), and the bank and
corpus the scripts read through the public API."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from openqa import (
    BankScorer,
    CrossValidation,
    OpenQAError,
    Question,
    ScoredQuestions,
    Solver,
    build_index,
    corpus_paragraphs,
    exam_bank,
    load_questions,
    run_eval,
    score_parts,
)
from openqa.scorers.base import OptionScores
from tests.helpers import make_data_dir

LETTERS = "ABCD"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    data = make_data_dir(root)
    where = {"data_dir": data, "index_dir": root / "indexes", "results_dir": root / "results", "settings_dir": root / "tuned"}
    (root / "tuned").mkdir()
    build_index("en", "custom", **where)
    build_index("en", "pmi", **where)
    return where, load_questions("us", "dev", data)


def question(i: int, answer: str = "A") -> Question:
    return Question(f"q{i}", f"question {i}", {k: f"option {k} of {i}" for k in LETTERS}, answer, f"option {answer} of {i}")


def scored(scores: list[list[float]], scale: str = "standardized", answers: str | None = None) -> ScoredQuestions:
    """Questions q0, q1, ... with these option scores (answer A unless ``answers`` says)."""
    return ScoredQuestions([OptionScores(question(i, (answers or "A" * len(scores))[i]), dict(zip(LETTERS, row)))
                            for i, row in enumerate(scores)], scale)


def test_score_all_is_what_each_question_scores_alone_and_what_run_eval_measures(site):
    where, questions = site
    solver = Solver.open("ir-custom", **where)
    all_at_once = solver.score_all(questions)
    assert [r.scores for r in all_at_once.results] == [solver.scores(q).scores for q in questions]
    assert all_at_once.scale == "standardized" and all_at_once.accuracy == run_eval("ir-custom", "us", split="dev", **where).accuracy
    assert all_at_once.summary()["n"] == len(questions) == 2


def test_parts_are_the_methods_as_solvers_open_them(site):
    where, questions = site
    parts = score_parts(questions, "us", ["ir-custom", "ir-custom:top_n=1", "pmi"], **where)
    assert list(parts) == ["ir-custom", "ir-custom:top_n=1", "pmi"]
    for label, solver in (("ir-custom", Solver.open("ir-custom", exam="us", **where)),
                          ("ir-custom:top_n=1", Solver.open("ir-custom", exam="us", top_n=1, **where)),
                          ("pmi", Solver.open("pmi", exam="us", **where))):
        assert [r.scores for r in parts[label].results] == [r.scores for r in solver.score_all(questions).results], label
    assert list(score_parts(questions, "us", **where)) == ["ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=50", "pmi"]
    with pytest.raises(OpenQAError, match="named twice"):
        score_parts(questions, "us", ["pmi", "pmi"], **where)
    with pytest.raises(OpenQAError, match="not among the parts"):
        score_parts(questions, "us", ["pmi"], predictions={"llm": "x.jsonl"}, **where)


def test_a_part_read_from_a_predictions_file_has_the_scores_of_its_run(site):
    where, questions = site
    run = run_eval("pmi", "us", split="dev", **where).to_dict()
    predictions = run["files"]["summary"].removesuffix(".json") + ".predictions.jsonl"
    read = score_parts(questions, "us", ["pmi", "earlier"], predictions={"earlier": predictions}, **where)
    def finite(part):  # an option without a score is written null and read back as no number
        return [{k: v for k, v in r.scores.items() if math.isfinite(v)} for r in part.results]

    assert finite(read["earlier"]) == [pytest.approx(scores, abs=5e-4) for scores in finite(read["pmi"])]  # 3 decimals


def test_from_hits_aggregates_each_options_best_hits_by_hand():
    class Hit:
        def __init__(self, score: float) -> None:
            self.score = score

    hits = [[[Hit(3.0), Hit(2.0), Hit(1.0)], [Hit(4.0)], [], [Hit(1.0), Hit(1.0)]]]
    assert ScoredQuestions.from_hits([question(0)], hits, 2, "sum").results[0].scores == {"A": 5.0, "B": 4.0, "C": 0.0, "D": 2.0}
    assert ScoredQuestions.from_hits([question(0)], hits, 2, "decay").results[0].scores == {"A": 4.0, "B": 4.0, "C": 0.0, "D": 1.5}
    assert ScoredQuestions.from_hits([question(0)], hits, 3, "max").results[0].scores == {"A": 3.0, "B": 4.0, "C": 0.0, "D": 1.0}
    with pytest.raises(OpenQAError, match="one list per option"):
        ScoredQuestions.from_hits([question(0)], [hits[0][:3]])


def test_a_letter_prior_is_each_letters_mean_probability():
    probabilities = scored([[0.5, 0.5, 0.0, 0.0], [0.1, 0.7, 0.1, 0.1]], "probability")
    prior = probabilities.letter_prior
    floor = 1e-6 / (1 + 2e-6)  # a probability of 0 is floored at 1e-6, then the question's are normalised
    assert prior["B"] == pytest.approx((0.5 / (1 + 2e-6) + 0.7) / 2, abs=1e-6) and prior["C"] == pytest.approx((floor + 0.1) / 2, abs=1e-6)
    assert scored([[1.0, 2.0, 3.0, 4.0]]).letter_prior == {}  # evidence scores have none
    assert scored([[0.5, 0.5, 0.0, 0.0], [0.1, 0.7, 0.1, 0.1]], "log-probability").letter_prior == prior  # the former name


def test_the_temperature_scales_with_the_logits():
    rng = np.random.default_rng(3)
    logits = [rng.normal(size=4) + np.array([1.0, 0, 0, 0]) for _ in range(60)]
    base = scored([[0.0] * 4] * 60)
    once, twice = base.with_logits(logits).calibration("us"), base.with_logits([2 * z for z in logits]).calibration("us")
    assert twice["temperature"] == pytest.approx(2 * once["temperature"], rel=1e-4)
    assert twice["log_likelihood"] == pytest.approx(once["log_likelihood"], abs=1e-4)  # the same probabilities
    assert base.with_logits(logits).logits()[0].tolist() == pytest.approx(logits[0].tolist())


def test_held_out_an_ensemble_of_one_informative_part_ranks_as_the_part_does():
    rng = np.random.default_rng(1)
    answers = "".join(rng.choice(list(LETTERS), size=80))
    rows = [(rng.normal(size=4) + 1.5 * np.array([letter == a for letter in LETTERS])).tolist() for a in answers]
    part = scored(rows, answers=answers)
    held = CrossValidation().held_out({"part": part})
    assert len(held.right) == 80 and set(held.right) <= {0.0, 1.0}
    assert 100 * held.right.mean() == pytest.approx(part.accuracy)  # a positive weight on every fold keeps its ranking
    assert held.summary() == {"log_likelihood": round(float(held.log_likelihood.mean()), 4), "accuracy": round(part.accuracy, 2)}
    assert all(math.log(1e-12) <= x < 0 for x in held.log_likelihood)
    assert (CrossValidation(folds=5, seed=0).folds, CrossValidation().seed, CrossValidation().l2) == (5, 0, 0.1)


def test_a_letter_prior_divided_out_changes_what_a_biased_part_weighs():
    rng = np.random.default_rng(2)
    answers = "".join(rng.choice(list(LETTERS), size=40))
    evidence = scored([(rng.normal(size=4) + np.array([letter == a for letter in LETTERS])).tolist() for a in answers], answers=answers)
    biased = scored([[0.1, 0.7, 0.1, 0.1] for _ in answers], "probability", answers)  # always B, whatever is asked
    with_prior, without = (CrossValidation().held_out({"ev": evidence, "llm": biased}, prior) for prior in (True, False))
    assert with_prior.log_likelihood.tolist() == pytest.approx(CrossValidation().held_out({"ev": evidence}).log_likelihood.tolist())
    assert without.log_likelihood.tolist() != pytest.approx(with_prior.log_likelihood.tolist())
    with pytest.raises(OpenQAError, match="same questions"):
        CrossValidation().held_out({"ev": evidence, "other": ScoredQuestions(evidence.results[::-1])})


def test_the_exam_bank_is_its_dev_split_and_votes_by_similarity(site):
    where, questions = site
    bank = exam_bank("us", **where)
    assert len(bank) == 2 and bank.describe()["sources"] == [{"dataset": "us", "split": "dev", "questions": 2}]
    test = load_questions("us", "test", where["data_dir"])  # the same questions: their copies are never their evidence
    assert bank.verbatim(test)["questions"] == len(test)
    near = [replace(q, question=q.question + " again") for q in test]  # near twins vote, by their similarity
    assert [r.prediction() for r in BankScorer(bank, 1).score(near, progress=False)] == [q.answer_idx for q in questions]
    own = BankScorer(bank, 1).score(questions, progress=False)  # a question never finds its own row
    assert all(n["question"] != r.question.question for r in own for n in r.details["solved_questions"])
    assert BankScorer.matches == ("exact", "normalized", "fuzzy") and (BankScorer(bank).k, BankScorer(bank).match) == (1, "normalized")


def test_corpus_paragraphs_are_what_the_index_holds(site):
    where, _ = site
    paragraphs = list(corpus_paragraphs("en", data_dir=where["data_dir"]))
    manifest = json.loads((where["index_dir"] / "en-custom" / "manifest.json").read_text())
    assert len(paragraphs) == manifest["paragraphs"] and paragraphs[0].pid.endswith(":0")
