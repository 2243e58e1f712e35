"""Pasted questions: the options are the trailing run of lines lettered A, B, C, ... in order."""

from __future__ import annotations

import time

import pytest

from openqa.data.pasted import (
    MAX_CHARS,
    _lines,
    is_complete,
    make_question,
    parse_block,
    parse_many,
    parse_option_flags,
)
from openqa.errors import OpenQAError


def test_organism_abbreviations_are_question_text():
    block = ("A man has bloody diarrhea.\nE. coli O157 was cultured.\nH. pylori infection is excluded.\n"
             "Which drug?\nA: Ciprofloxacin\nB. Gentamicin\nC) Ceftriaxone\n(D) Trimethoprim")
    q = parse_block(block)
    assert q.options == {"A": "Ciprofloxacin", "B": "Gentamicin", "C": "Ceftriaxone", "D": "Trimethoprim"}
    assert q.question == "A man has bloody diarrhea. E. coli O157 was cultured. H. pylori infection is excluded. Which drug?"


def test_a_lettered_line_before_the_options_stays_in_the_question():
    q = parse_block("A. baumannii grows from the sputum.\nWhich drug?\nA: Colistin\nB: Penicillin")
    assert q.question.startswith("A. baumannii grows") and q.options == {"A": "Colistin", "B": "Penicillin"}


def test_blank_lines_and_windows_line_ends_and_bom_are_accepted():
    q = parse_block("\ufeffA woman has chest pain.\r\n\r\nWhich drug?\r\n\r\nA: Aspirin\r\n\r\nB: Heparin\r\n")
    assert q.question == "A woman has chest pain. Which drug?" and q.options == {"A": "Aspirin", "B": "Heparin"}


def test_chinese_option_markers():
    q = parse_block("患者男性，胸痛。应选用\nA：阿司匹林\nB、肝素\nC．华法林\n（D）氯吡格雷")
    assert q.options == {"A": "阿司匹林", "B": "肝素", "C": "华法林", "D": "氯吡格雷"}


def test_terminal_escapes_are_removed():
    q = parse_block("Which \x1b[31mdrug\x1b[0m?\x07\nA: x\nB: y")
    assert q.question == "Which drug?"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("Why?\nA: x\nA: y", "option A is given twice"),
        ("Why?\nA: x\nB: y\nB: z", "option B is given twice"),
        ("Why?\nA: x\nB: y\nplease answer quickly", "text after the options: 'please answer quickly'"),
        ("A: x\nB: y", "empty question"),
        ("Why?\nA: x", "at least two options"),
        ("Why?", "at least two options"),
        ("", "empty question"),
    ],
)
def test_bad_blocks_are_refused_in_one_line(block, message):
    with pytest.raises(OpenQAError, match=message):
        parse_block(block)


def test_many_questions_one_after_another():
    questions = parse_many("First?\nA: x\nB: y\n\nSecond?\nA: z\nB: w\nC: v\n", "p")
    assert [(q.qid, q.question, len(q.options)) for q in questions] == [("p1", "First?", 2), ("p2", "Second?", 3)]
    with pytest.raises(OpenQAError, match="question 2: give at least two options"):
        parse_many("First?\nA: x\nB: y\nSecond without options")


def test_complete_only_once_two_options_end_the_block():
    assert not is_complete("Why?") and not is_complete("Why?\nA: x")
    assert is_complete("Why?\nA: x\nB: y")


def test_option_flags_refuse_a_repeated_letter_and_sizes_are_bounded():
    assert parse_option_flags(["a=x", "B=y"]) == {"A": "x", "B": "y"}
    with pytest.raises(OpenQAError, match="option A is given twice"):
        parse_option_flags(["A=x", "A=y"])
    with pytest.raises(OpenQAError, match="too long"):
        make_question("x" * MAX_CHARS, {"A": "a", "B": "b"})
    with pytest.raises(OpenQAError, match="at most 10 options"):
        make_question("Why?", {chr(65 + i): "a" for i in range(11)})


def test_long_lines_parse_in_linear_time():
    """An option line of 200,000 characters with a space run inside: the old pattern (a lazy group,
    then ``\\s*$``) backtracked over it for minutes; a linear one takes milliseconds (the bound is loose)."""
    started = time.monotonic()
    for line in ("A: x" + " " * 200_000 + "y", "A: " + "x " * 100_000 + "y", " " * 200_000 + "A"):
        assert _lines(line)[0].text.endswith(line.strip()[-1])
    assert time.monotonic() - started < 10
