import pytest

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.evaluate.metrics import summarise, wilson_interval
from openqa.retrieval.base import Hit
from openqa.scorers.base import OptionScores
from openqa.scorers.ir import QUERY_MODES, IRSettings, aggregate, option_queries, question_query


def q(qid="q1", options=None, answer="A", phrases=None):
    options = options or {"A": "aspirin", "B": "heparin", "C": "warfarin", "D": "statin"}
    return Question(qid, "A 60-year-old man comes with chest pain.", options, answer, options[answer], None, phrases)


def test_aggregates():
    hits = [Hit(0, 3.0), Hit(1, 2.0), Hit(2, 1.0)]
    assert aggregate(hits, 2, "sum") == 5.0
    assert aggregate(hits, 3, "max") == 3.0
    assert aggregate(hits, 3, "decay") == pytest.approx(3 + 1 + 1 / 3)
    assert aggregate([], 3, "sum") == 0.0


def test_query_modes():
    with_phrases = q(phrases=("chest pain", "man"))
    assert question_query(with_phrases, "phrases", "en") == "chest pain man"
    assert question_query(q(), "phrases", "en") == "60-year-old man chest pain"  # no phrases: the filter
    assert question_query(q(), "full", "en") == q().question
    assert option_queries(with_phrases, "phrases", "en")[1] == "chest pain man heparin"
    assert option_queries(with_phrases, "option", "en")[1] == "heparin"  # reader evidence about the option alone
    assert set(QUERY_MODES) == {"phrases", "filter", "full", "option"}


def test_bad_settings_are_refused():
    with pytest.raises(OpenQAError, match="aggregate"):
        IRSettings(aggregate="median")
    with pytest.raises(OpenQAError, match="top-N must be at least 1"):
        IRSettings(top_n=0)


def test_ties_are_broken_by_option_text_not_position():
    opts = {"A": "aspirin", "B": "heparin", "C": "warfarin", "D": "statin"}
    shuffled = {"A": "statin", "B": "warfarin", "C": "heparin", "D": "aspirin"}
    first = OptionScores(q(options=opts), {"A": 1.0, "B": 1.0, "C": 1.0, "D": 0.0})
    second = OptionScores(q(options=shuffled, answer="D"), {"A": 0.0, "B": 1.0, "C": 1.0, "D": 1.0})
    assert first.tied_best() == ["A", "B", "C"]
    # the same three texts tied in other positions: the same text wins
    assert opts[first.prediction()] == shuffled[second.prediction()]


def test_summary_counts_ties_and_expected_accuracy():
    tied = OptionScores(q(qid="a"), {"A": 1.0, "B": 1.0, "C": 0.0, "D": 0.0})
    right = OptionScores(q(qid="b"), {"A": 2.0, "B": 1.0, "C": 0.0, "D": 0.0})
    s = summarise([tied, right])
    assert s["n"] == 2
    assert s["ties"]["questions_with_tied_best"] == 1
    assert s["ties"]["expected_accuracy_random_ties"] == 75.0
    assert s["correct"] == (tied.prediction() == "A") + 1


def test_wilson_interval():
    lo, hi = wilson_interval(36, 100)
    assert lo == pytest.approx(27.28, abs=0.05) and hi == pytest.approx(45.75, abs=0.05)
    assert wilson_interval(0, 0) == (0.0, 0.0)
