"""``--demonstrations K``: the K nearest solved questions of the bank, with their answers, asked and
answered before the question in an LLM's prompt; a question never sees itself (leave-one-out on
dev), and with K = 0 the prompt is exactly the one without demonstrations (cached replies stay)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openqa.cli import main
from openqa.data import Question
from openqa.llm import scorer as llm_scorer
from openqa.llm.prompts import build_messages
from openqa.llm.settings import MAX_DEMONSTRATIONS
from openqa.scorers.bank import QuestionBank
from tests.helpers import make_data_dir
from tests.llm_fixtures import make_tiny_llm

pytest.importorskip("transformers")

SOLVED = Question("dev-7", "Which drug inhibits cyclooxygenase?", {"A": "Heparin", "B": "Aspirin"}, "B", "Aspirin")
ASKED = Question("test-1", "Which drug blocks cell wall synthesis?", {"A": "Gentamicin", "B": "Ceftriaxone"}, "B", "Ceftriaxone")


def test_demonstrations_are_asked_and_answered_before_the_question():
    plain = build_messages(ASKED, ("B", "A"), [], "letters")
    shown = build_messages(ASKED, ("B", "A"), [], "letters", [SOLVED])
    assert [m["role"] for m in plain] == ["system", "user"]
    assert [m["role"] for m in shown] == ["system", "user", "assistant", "user"]
    assert shown[0] == plain[0] and shown[-1] == plain[-1]  # the question itself is asked as without them
    assert SOLVED.question in shown[1]["content"] and "A. Heparin\nB. Aspirin" in shown[1]["content"]
    assert shown[2]["content"] == "B"  # the solved question's letter, in its own order
    assert build_messages(ASKED, ("B", "A"), [], "letters", []) == plain


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("demos")
    make_data_dir(base)
    make_tiny_llm(base / "tiny")
    return base


def test_an_llm_run_shows_the_nearest_other_solved_questions(root, capsys, monkeypatch):
    seen: list[tuple[str, list[str]]] = []
    real = llm_scorer.build_messages

    def spy(question, order, passages, instruction, demonstrations=()):
        seen.append((question.qid, [d.qid for d in demonstrations]))
        return real(question, order, passages, instruction, demonstrations)

    monkeypatch.setattr(llm_scorer, "build_messages", spy)
    where = ["--data-dir", str(root / "data_clean"), "--index-dir", str(root / "indexes"), "--output", str(root / "results")]
    code = main(["eval", "--dataset", "us", "--split", "dev", "--method", "llm", "--model", str(root / "tiny"), "--evidence",
                 "none", "--demonstrations", "1", "--cache-dir", str(root / "cache"), "--json", *where])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert summary["settings"]["demonstrations"] == 1 and summary["settings"]["sources"]["demonstrations"] == "--demonstrations"
    assert "demo1" in Path(summary["files"]["summary"]).name
    # the dev split holds both questions: each is shown the other, never itself
    assert dict(seen) == {"us-dev-1": ["us-dev-2"], "us-dev-2": ["us-dev-1"]}


def test_a_negative_count_is_refused_in_one_line(root, capsys):
    code = main(["eval", "--dataset", "us", "--method", "llm", "--model", str(root / "tiny"), "--demonstrations", "-1",
                 "--data-dir", str(root / "data_clean"), "--index-dir", str(root / "indexes")])
    assert code == 2
    assert capsys.readouterr().err.strip() == "openqa: error: --demonstrations must be at least 0, not -1"


def test_a_count_over_the_maximum_is_refused_before_the_bank_is_read(root, capsys, monkeypatch):
    """No bank is searched nor prompt built for a K no prompt can hold (NL8)."""
    monkeypatch.setattr(QuestionBank, "nearest", lambda *a: pytest.fail("the bank was searched"))
    code = main(["eval", "--dataset", "us", "--method", "llm", "--model", str(root / "tiny"), "--demonstrations",
                 str(MAX_DEMONSTRATIONS + 1), "--data-dir", str(root / "data_clean"), "--index-dir", str(root / "indexes")])
    assert code == 2
    assert capsys.readouterr().err.strip() == (f"openqa: error: --demonstrations must be at most {MAX_DEMONSTRATIONS}, "
                                               f"not {MAX_DEMONSTRATIONS + 1}: each is a whole solved question in the prompt")


def test_demonstrations_without_an_llm_are_refused_in_one_line(root, capsys):
    """No LLM would see them: silently dropped, the run would look like it used them."""
    code = main(["eval", "--dataset", "us", "--method", "ir-custom", "--demonstrations", "2",
                 "--data-dir", str(root / "data_clean"), "--index-dir", str(root / "indexes")])
    assert code == 2
    assert capsys.readouterr().err.strip() == ("openqa: error: --demonstrations shows solved questions to an LLM: use it with "
                                               "--method llm (or an ensemble given --model or --endpoint)")
