"""An answer to a question that looks written in another language than the index says so, tied or not."""

from __future__ import annotations

from openqa.answer import language_note, no_match_message
from openqa.data import Question
from openqa.scorers.base import OptionScores


def scored(text: str, options: dict[str, str], scores: dict[str, float]) -> OptionScores:
    return OptionScores(Question("q-1", text, options, "A", options["A"]), scores)


def test_a_chinese_question_read_as_english_is_told_so_without_a_tie():
    result = scored("患者男性，胸痛三小时，心电图示ST段抬高，最可能的诊断是什么药物", {"A": "Aspirin", "B": "Heparin"}, {"A": 2.0, "B": 1.0})
    assert result.tied_best() == ["A"]
    assert language_note(result.question, "en") == "the question looks Chinese but was read as English: try --lang zh"
    assert language_note(result.question, "zh") == ""


def test_an_english_question_read_as_english_gets_no_note(tmp_path):
    from openqa.api import Solver
    from tests.helpers import QUESTIONS, make_data_dir

    data = make_data_dir(tmp_path)
    solver = Solver.open("ir-custom", "en", data_dir=data, index_dir=tmp_path / "indexes")
    text, _ = solver.text(Question("q-1", QUESTIONS[0]["question"], QUESTIONS[0]["options"], "C", "Ceftriaxone"), 1, 1, False)
    assert "try --lang" not in text
    chinese = Question("q-2", "患者男性，胸痛三小时，心电图示段抬高，最可能使用哪种药物治疗", {"A": "Aspirin", "B": "Gentamicin"}, "A", "Aspirin")
    text, _ = solver.text(chinese, 1, 1, False)
    assert "try --lang zh" in text.splitlines()[0]


def test_no_evidence_for_a_question_in_the_index_language_does_not_ask_about_another_language():
    """PMI finds no evidence for an English question whose option words never occur near its words:
    the message says so, and asks about another language only for a question that looks written in one."""
    english = Question("q-1", "Which drug inhibits cyclooxygenase?", {"A": "Aspirin", "B": "Heparin"}, "A", "Aspirin")
    chinese = Question("q-2", "患者胸痛，应选用哪种药物？", {"A": "阿司匹林", "B": "肝素"}, "A", "阿司匹林")
    said = no_match_message("en", questions=[english])
    assert "another language" not in said and said.startswith("the en index holds no evidence for any option")
    assert no_match_message("en", questions=[english, chinese]).endswith("is it in another language? (use --lang zh)")
    assert no_match_message("en").endswith("is it in another language? (use --lang zh)")
