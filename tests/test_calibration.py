"""How far to trust an answer: temperatures fitted by likelihood, calibration error and
risk-coverage against cases worked out by hand, the ensemble's conditional logit, and the commands
that fit, report and show probabilities."""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np
import pytest

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.evaluate.calibration import (
    Calibration,
    calibrated_ece,
    confidence_report,
    cross_fitted_logits,
    fit_conditional_logit,
    fit_temperature,
    folds,
    risk_coverage,
    softmax,
    uncalibrated,
)
from openqa.evaluate.metrics import paired_bootstrap, wilson_interval
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ensemble import EnsembleScorer, letter_prior
from openqa.scorers.logits import option_logits
from tests.helpers import QUESTIONS, run, site_env

LETTERS = "ABCD"


def question(i: int, answer: str = "A") -> Question:
    return Question(f"q{i}", f"question {i}", {k: f"option {k} of {i}" for k in LETTERS}, answer, f"option {answer} of {i}")


def result(i: int, scores: Sequence[float], answer: str = "A") -> OptionScores:
    return OptionScores(question(i, answer), dict(zip(LETTERS, map(float, scores))))


def test_a_temperature_is_recovered_from_answers_drawn_with_it():
    rng = np.random.default_rng(7)
    for true in (0.5, 2.0):
        logits = [rng.normal(size=4) for _ in range(6000)]
        answers = [int(rng.choice(4, p=softmax(z / true))) for z in logits]
        assert fit_temperature(logits, answers) == pytest.approx(true, rel=0.08)


def test_fitting_is_deterministic_and_recovers_weights():
    rng = np.random.default_rng(3)
    features = [rng.normal(size=(4, 2)) for _ in range(4000)]
    true = np.array([1.5, 0.5])
    answers = [int(rng.choice(4, p=softmax(f @ true))) for f in features]
    first = fit_conditional_logit(features, answers)
    assert np.array_equal(first, fit_conditional_logit(features, answers))
    assert first == pytest.approx(true, rel=0.15)
    shrunk = fit_conditional_logit(features, answers, l2=500.0)
    assert np.all(shrunk < first)  # the penalty pulls the weights towards 0


def test_cross_fitted_logits_come_from_weights_fitted_without_each_fold():
    rng = np.random.default_rng(5)
    features = [rng.normal(size=(4, 2)) for _ in range(23)]
    answers = [int(rng.integers(4)) for _ in features]
    dealt = folds(23)
    assert len(dealt) == 5 and sorted(np.concatenate(dealt).tolist()) == list(range(23))  # each question in one fold
    assert all(np.array_equal(a, b) for a, b in zip(dealt, folds(23)))  # seeded: the same folds every run
    held = cross_fitted_logits(features, answers, l2=0.1)
    for fold in dealt:
        kept = [i for i in range(23) if i not in set(fold.tolist())]
        w = fit_conditional_logit([features[i] for i in kept], [answers[i] for i in kept], l2=0.1)
        for i in fold:
            assert np.allclose(held[i], features[i] @ w)
    assert len(folds(3)) == 3  # never more folds than questions
    with pytest.raises(OpenQAError, match="at least two questions"):
        cross_fitted_logits(features[:1], answers[:1], l2=0.1)


def test_calibration_error_brier_likelihood_and_risk_coverage_by_hand():
    # Confidences 0.9 (right), 0.8 (wrong), 0.3 and 0.3 (one right): options' probabilities given outright.
    results = [result(0, [4, 3, 2, 1], "A"), result(1, [4, 3, 2, 1], "B"), result(2, [4, 3, 2, 1], "A"),
               result(3, [4, 3, 2, 1], "C")]
    probabilities = [{"A": 0.9, "B": 0.1, "C": 0.0, "D": 0.0}, {"A": 0.8, "B": 0.2, "C": 0.0, "D": 0.0},
                     {"A": 0.3, "B": 0.3, "C": 0.2, "D": 0.2}, {"A": 0.3, "B": 0.3, "C": 0.2, "D": 0.2}]
    report = confidence_report(results, probabilities)
    # bins: 0.9 -> |1 - 0.9| x 1/4; 0.8 -> |0 - 0.8| x 1/4; 0.3 twice -> |0.5 - 0.3| x 2/4
    assert report["ece"] == pytest.approx(0.025 + 0.2 + 0.1)
    brier = [(0.1**2 + 0.1**2), (0.8**2 + 0.8**2), (0.7**2 + 0.3**2 + 0.2**2 + 0.2**2), (0.3**2 + 0.3**2 + 0.8**2 + 0.2**2)]
    assert report["brier"] == pytest.approx(np.mean(brier), abs=1e-4)
    assert report["log_likelihood"] == pytest.approx(np.mean(np.log([0.9, 0.2, 0.3, 0.2])), abs=1e-4)
    # most confident first: right, wrong, then the tie of two sharing one right answer evenly
    coverage, risk = risk_coverage(np.array([0.9, 0.8, 0.3, 0.3]), np.array([True, False, True, False]))
    assert coverage.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert risk == pytest.approx([0.0, 0.5, 0.5, 0.5])
    assert report["aurc"] == pytest.approx(0.375)
    at = report["accuracy_at_coverage"]
    assert (at["10"]["n"], at["10"]["accuracy"]) == (1, 100.0)
    assert (at["50"]["n"], at["50"]["accuracy"]) == (2, 50.0)
    assert at["100"]["accuracy"] == 50.0 and at["100"]["ci95"] == list(wilson_interval(2, 4))


def test_the_calibration_error_of_a_calibrated_method_is_sampling_noise_worked_out_exactly():
    from scipy.stats import binom

    # Certain answers are always right: a calibrated method shows no error at all.
    certain = calibrated_ece(np.ones(50))
    assert (certain["median"], certain["ci95"]) == (0.0, [0.0, 0.0])
    # 400 answers at confidence 0.5 share one bin: the error is |K/400 - 0.5| with K ~ Binomial(400, 0.5),
    # whose median is the least m with P(|K - 200| <= m) >= 1/2.
    exact = next(m for m in range(201) if binom.cdf(200 + m, 400, 0.5) - binom.cdf(199 - m, 400, 0.5) >= 0.5) / 400
    floor = calibrated_ece(np.full(400, 0.5))
    assert abs(floor["median"] - exact) <= 1 / 400  # 1,000 seeded draws: within one answer of the exact median
    assert floor["ci95"][0] <= floor["median"] <= floor["ci95"][1]
    assert floor == calibrated_ece(np.full(400, 0.5))  # seeded: the same figure on every run
    assert confidence_report([result(0, [4, 3, 2, 1], "A")], [{"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}])["ece_if_calibrated"]["median"] == 0.0


def test_tied_confidences_are_never_ordered_by_position():
    confidence = np.array([0.5, 0.5, 0.5, 0.5])
    for correct in ([True, True, False, False], [False, False, True, True]):
        assert risk_coverage(confidence, np.array(correct))[1] == pytest.approx([0.5] * 4)


def test_wilson_interval_matches_the_closed_form_scipy_gives():
    from scipy.stats import binomtest

    for correct, n in ((413, 1273), (0, 10), (10, 10), (1, 3)):
        ci = binomtest(correct, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(correct, n) == (round(100 * ci.low, 2), round(100 * ci.high, 2))


def test_logit_scales():
    scores = OptionScores(question(0), {"A": 10.0, "B": 20.0, "C": float("-inf"), "D": 30.0})
    z = option_logits(scores, "standardized")
    assert z[[0, 1, 3]] == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-4) and z[2] == pytest.approx(z[0] - 1.0)
    equal = option_logits(OptionScores(question(0), dict.fromkeys(LETTERS, 3.0)), "standardized")
    assert equal.tolist() == [0.0] * 4
    probs = OptionScores(question(0), {"A": 0.5, "B": 0.5, "C": 0.0, "D": 0.0})
    assert option_logits(probs, "probability")[:2] == pytest.approx([math.log(0.5)] * 2)


class Fixed(OptionScorer):
    """A scorer whose scores are given."""

    def __init__(self, scores: dict[str, list[float]]) -> None:
        self.scores = scores

    def score(self, questions, progress=True):
        return [OptionScores(q, dict(zip(q.options, self.scores[q.qid]))) for q in questions]


def test_an_ensemble_of_one_part_ranks_exactly_like_the_part():
    rng = np.random.default_rng(1)
    qs = [question(i) for i in range(50)]
    part = Fixed({q.qid: rng.normal(size=4).tolist() for q in qs})
    ensemble = EnsembleScorer({"part": part}, [0.7])
    for alone, combined in zip(part.score(qs), ensemble.score(qs)):
        assert sorted(LETTERS, key=alone.scores.get) == sorted(LETTERS, key=combined.scores.get)
        assert alone.prediction() == combined.prediction()
    with pytest.raises(OpenQAError, match="needs 1 weights"):
        EnsembleScorer({"part": part}, [1.0, 2.0])


def test_ensemble_scores_are_weighted_sums_of_part_logits():
    qs = [question(0)]
    first, second = Fixed({"q0": [1.0, 2.0, 3.0, 4.0]}), Fixed({"q0": [4.0, 3.0, 2.0, 1.0]})
    combined = EnsembleScorer({"a": first, "b": second}, [2.0, 1.0]).score(qs)[0]
    z = option_logits(first.score(qs)[0], "standardized")
    assert list(combined.scores.values()) == pytest.approx(2 * z - z)  # the second part's z is the first's reversed
    assert combined.details["part_logits"]["a"] == pytest.approx(z.round(4).tolist())


class Letters(Fixed):
    """A scorer of letter probabilities (an LLM's)."""

    scale = "probability"


def test_a_letter_prior_worked_by_hand_is_divided_out_of_a_letter_probability_part():
    qs = [question(0), question(1)]
    llm = Letters({"q0": [0.5, 0.3, 0.1, 0.1], "q1": [0.1, 0.5, 0.25, 0.15]})
    prior = letter_prior(llm.score(qs), llm.scale)
    assert prior == pytest.approx({"A": 0.3, "B": 0.4, "C": 0.175, "D": 0.125})  # each letter's mean probability
    assert letter_prior(Fixed({"q0": [1.0, 2.0, 3.0, 4.0]}).score(qs[:1]), "standardized") == {}
    plain, corrected = (EnsembleScorer({"llm": llm}, [1.0], priors).score(qs) for priors in (None, {"llm": prior}))
    assert [r.prediction() for r in plain] == ["A", "B"]
    # q1: B 0.5 / 0.4 = 1.25 and C 0.25 / 0.175 = 1.43: C, once B's favour is divided out
    assert [r.prediction() for r in corrected] == ["A", "C"]
    assert list(corrected[1].scores.values()) == pytest.approx(
        [math.log(0.1 / 0.3), math.log(0.5 / 0.4), math.log(0.25 / 0.175), math.log(0.15 / 0.125)])
    five = Question("q5", "five options", {k: k for k in "ABCDE"}, "A", "A")  # E has no prior: left as it is
    alone = OptionScores(five, {"A": 0.2, "B": 0.2, "C": 0.2, "D": 0.2, "E": 0.2})
    assert EnsembleScorer({"llm": llm}, [1.0], {"llm": prior}).logits([alone])[:, 0] == pytest.approx([math.log(0.2)] * 5)
    with pytest.raises(OpenQAError, match="not a part of the ensemble"):
        EnsembleScorer({"llm": llm}, [1.0], {"other": prior})


def test_a_calibration_says_what_a_confidence_meant_on_dev_and_round_trips():
    rng = np.random.default_rng(5)
    results = []
    for i in range(400):
        z = rng.normal(size=4)
        answer = LETTERS[int(rng.choice(4, p=softmax(z)))]
        results.append(result(i, z * 3.0, answer))  # scores 3x too sharp: the fit should find a temperature near 3
    fitted = Calibration.fit(results, "logits", "us", {"top_n": 10})
    assert 2.0 < fitted.temperature < 4.5 and fitted.n == 400 and sum(b[0] for b in fitted.bins) == 400
    again = Calibration.from_dict(json.loads(json.dumps(fitted.to_dict())), "here")
    assert again.probabilities(results[0]) == fitted.probabilities(results[0]) and again.source == "here"
    assert "on MedQA us dev, answers this confident or more were right" in fitted.meaning(0.3, 4)
    assert fitted.meaning(0.3, 4).endswith("chance is 25%") and "chance is 50%" in fitted.meaning(0.3, 2)
    assert fitted.meaning(0.3, 5).endswith("chance is 20% (calibrated on 4-option questions; this one has 5 options)")
    assert again.confidences == fitted.confidences and again.correct == fitted.correct and again.options == {4: 400}
    with pytest.raises(OpenQAError, match="unreadable calibration"):
        Calibration.from_dict({"temperature": 1.0})
    with pytest.raises(OpenQAError, match="positive number"):
        Calibration.from_dict({**fitted.to_dict(), "temperature": float("nan")})


def test_a_record_of_letter_probabilities_under_the_former_scale_name_reads_the_same():
    """An LLM's calibration tuned before the scale was named ``probability`` (``log-probability``)
    gives the same probabilities: the softmax of the logs of the letter probabilities over the temperature."""
    record = {**uncalibrated("probability").to_dict(), "temperature": 2.0, "dataset": "us", "n": 100}
    letters = OptionScores(question(0), {"A": 0.64, "B": 0.16, "C": 0.16, "D": 0.04})
    for name in ("probability", "log-probability"):
        read = Calibration.from_dict({**record, "scale": name})
        assert read.scale == "probability" and "over probability scores" in read.describe()
        # over temperature 2 each probability counts as its square root: 0.8, 0.4, 0.4, 0.2 of 1.8
        assert read.probabilities(letters) == pytest.approx({"A": 0.8 / 1.8, "B": 0.4 / 1.8, "C": 0.4 / 1.8, "D": 0.2 / 1.8})
    with pytest.raises(OpenQAError) as refused:
        Calibration.from_dict({**record, "scale": "percent"})
    assert str(refused.value) == ("unknown score scale 'percent': choose one of standardized, probability, logits "
                                  "(or the former log-probability)")


def test_every_dev_questions_sentence_is_a_literal_count_of_dev():
    """The sentence for each dev answer's own confidence counts, exactly, the dev answers at least
    as confident (to the kept decimals) and the right ones among them (brute force), 4- and
    5-option questions together; chance is that question's own."""
    rng = np.random.default_rng(11)
    results = []
    for i in range(300):
        letters = "ABCDE"[: 4 + i % 2]
        z = rng.normal(size=len(letters)).round(1)  # rounded: many ties in confidence
        answer = letters[int(rng.choice(len(letters), p=softmax(z)))]
        q = Question(f"q{i}", f"question {i}", {k: f"option {k}" for k in letters}, answer, "", None, None)
        results.append(OptionScores(q, dict(zip(letters, map(float, z)))))
    fitted = Calibration.fit(results, "logits", "us", {})
    assert fitted.options == {4: 150, 5: 150}
    confidence = [round(max(fitted.probabilities(r).values()), 4) for r in results]
    right = [r.prediction() == r.question.answer_idx for r in results]
    for r, p in zip(results, confidence):
        above = [ok for c, ok in zip(confidence, right) if c >= p]
        said = fitted.meaning(p, len(r.scores))
        assert f"were right {100 * sum(above) / len(above):.0f}% of the time ({sum(above)} of {len(above)})" in said
        assert said.endswith(f"chance is {100 / len(r.scores):.0f}%")
    assert fitted.meaning(0.9999, 4).startswith("no answer on MedQA us dev was this confident") or max(confidence) >= 0.9999
    old = Calibration.from_dict({k: v for k, v in fitted.to_dict().items() if k not in ("confidences", "correct", "options")})
    floor = math.floor(confidence[0] * 20) / 20  # an older record counts from the floor of the bin, and says so
    assert f"answers of confidence {floor:.2f} or more were right" in old.meaning(confidence[0], 4)


def test_paired_bootstrap_is_seeded_and_signed():
    qs = [question(i) for i in range(40)]
    good = [OptionScores(q, {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}) for q in qs]
    bad = [OptionScores(q, {"A": 0.0, "B": 1.0, "C": 0.0, "D": 0.0}) if i % 2 else good[i] for i, q in enumerate(qs)]
    once = paired_bootstrap(good, bad)
    assert once == paired_bootstrap(good, bad)
    assert once["difference"] == 50.0 and once["ci95"][0] > 0 and once["only_first_right"] == 20


# The commands, on the tiny fixture (the shipped probabilities of the real datasets never leak in).

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    env = site_env(root)
    return root, env


@pytest.mark.spawns
def test_tune_fits_probabilities_that_eval_and_answer_use(site):
    root, env = site
    done = run("tune", "--method", "ir-custom", "--dataset", "us", env=env)
    assert done.returncode == 0, done.stderr
    assert "probabilities: temperature" in done.stdout and "ir-custom-us.calibration.json" in done.stdout
    record = json.loads((root / "tuned" / "ir-custom-us.calibration.json").read_text())
    assert record["calibration"]["dataset"] == "us" and record["dev"]["n"] == 2
    done = run("eval", "--dataset", "us", "--split", "test", "--json", env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["settings"]["sources"]["probabilities"] == "your openqa tune: tuned/ir-custom-us.calibration.json"
    confidence = summary["confidence"]
    assert set(confidence["accuracy_at_coverage"]) == {"10", "20", "50", "100"} and 0 <= confidence["ece"] <= 1
    stem = root / "results" / "us-test-ir-custom"
    assert stem.with_suffix(".risk-coverage.png").read_bytes().startswith(b"\x89PNG")
    assert "## Confidence" in stem.with_suffix(".md").read_text()
    rows = [json.loads(line) for line in stem.with_suffix(".predictions.jsonl").read_text().splitlines()]
    assert all(sum(r["probabilities"].values()) == pytest.approx(1, abs=1e-3) for r in rows)
    q = ["--question", "Which drug that inhibits cyclooxygenase reduces mortality after chest pain?",
         "--option", "A=Aspirin", "--option", "B=Gentamicin", "--option", "C=Ciprofloxacin", "--option", "D=Ceftriaxone"]
    done = run("answer", *q, "--json", env=env)
    answer = json.loads(done.stdout)
    assert answer["prediction"] == "A" and answer["confidence"]["probability"] == max(o["probability"] for o in answer["options"])
    assert "right" in answer["confidence"]["meaning"] and "chance is 25%" in answer["confidence"]["meaning"]
    (root / "untuned").mkdir(exist_ok=True)
    untuned = {**env, "OPENQA_SETTINGS": str(root / "untuned")}  # two dev questions fit a temperature near 0
    done = run("answer", *q, "--min-confidence", "0.99", env=untuned)
    assert done.returncode == 0 and "Prediction: none (openqa abstains: its best guess " in done.stdout
    assert "below --min-confidence 0.99" in done.stdout
    done = run("answer", *q, "--min-confidence", "1.5", env=env)
    assert done.returncode == 2 and done.stderr.strip() == "openqa: error: --min-confidence must be a probability from 0 to 1, not 1.5"


@pytest.mark.spawns
def test_an_ensemble_is_tuned_evaluated_against_its_best_part(site):
    root, env = site
    from openqa.config import Settings
    from openqa.data.pasted import make_question
    from openqa.methods import method, open_method
    from openqa.workspace import Context, Exam

    with pytest.raises(OpenQAError, match="no ensemble is fitted for us5: run openqa tune --method ensemble --dataset us5"):
        method("ensemble").fitted(Context(Settings.resolve(settings_dir=root / "none")), Exam.resolve("us5"))
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,ir-custom:top_n=1,pmi", env=env)
    assert done.returncode == 0, done.stderr
    record = json.loads((root / "tuned" / "ensemble-us.json").read_text())
    assert record["chosen"]["parts"] == ["ir-custom", "ir-custom:top_n=1", "pmi"] and len(record["chosen"]["weights"]) == 3
    assert [row["part"] for row in record["grid"]] == ["ir-custom", "ir-custom:top_n=1", "pmi", "ensemble"]
    done = run("eval", "--method", "ensemble", "--dataset", "us", "--json", env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert set(summary["parts"]) == {"ir-custom", "ir-custom:top_n=1", "pmi"}
    assert summary["versus_best_part"]["part"] == record["chosen"]["best_part"]
    assert summary["settings"]["sources"]["weights"] == "your openqa tune: tuned/ensemble-us.json"
    calibration = json.loads((root / "tuned" / "ensemble-us.calibration.json").read_text())["calibration"]
    assert calibration["fitted_on"] == "logits under weights fitted without each question (2-fold cross-fitting, seed 0)"
    assert "2-fold cross-fitting" in summary["settings"]["probabilities"]
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", "ensemble", env=env)
    assert done.returncode == 2 and "cannot be a part" in done.stderr
    ctx = Context(Settings.resolve(data_dir=env["OPENQA_DATA"], index_dir=root / "indexes", settings_dir=root / "tuned"))
    opened = open_method(ctx, "ensemble", Exam.resolve("us"))
    question = make_question(QUESTIONS[0]["question"], QUESTIONS[0]["options"])
    parts = {label: method(label.partition(":")[0]).estimate(part, question, "en").seconds for label, part in opened.parts.items()}
    assert parts["ir-custom"] == parts["ir-custom:top_n=1"] > 0 and parts["pmi"] > 0  # its depth leaves the queries as they are
    assert method("ensemble").estimate(opened, question, "en").seconds == pytest.approx(sum(parts.values()))  # all its parts' work


def test_a_fit_on_few_questions_says_so():
    """A temperature fitted on 20 dev questions is kept, but whatever shows it says it is mostly noise."""
    from openqa.evaluate.calibration import FEW_QUESTIONS, Calibration

    few = Calibration.from_dict({"temperature": 1000.0, "scale": "logits", "dataset": "us", "n": 20, "bins": [[0, 0]] * 20, "chance": 0.25}, "test")
    enough = Calibration.from_dict({"temperature": 2.0, "scale": "logits", "dataset": "us", "n": FEW_QUESTIONS, "bins": [[0, 0]] * 20, "chance": 0.25}, "test")
    assert few.describe().endswith("(20 questions, few: under 100, mostly noise)")
    assert enough.describe().endswith(f"({FEW_QUESTIONS} questions)")


def test_the_calibrated_ece_range_does_not_depend_on_question_order():
    from openqa.evaluate.calibration import calibrated_ece

    confidence = np.random.default_rng(0).uniform(0.25, 1.0, 300)
    assert calibrated_ece(confidence, draws=200) == calibrated_ece(confidence[::-1].copy(), draws=200)
    assert calibrated_ece(confidence, draws=200) == calibrated_ece(np.random.default_rng(1).permutation(confidence), draws=200)
