"""One real-data check: index two First Aid books from ../shared/medqa and answer real questions."""

from __future__ import annotations

import pytest

from openqa.answer import solve
from openqa.data import load_questions
from openqa.data.pasted import make_question
from openqa.evaluate.metrics import summarise
from openqa.methods import method
from openqa.retrieval.registry import build_index, open_index
from openqa.scorers.ir import IRSettings

BOOKS = ("First_Aid_Step1.txt", "First_Aid_Step2.txt")


@pytest.fixture(scope="module")
def engine(medqa_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    data = root / "data_clean"
    (data / "textbooks" / "en").mkdir(parents=True)
    for name in BOOKS:
        (data / "textbooks" / "en" / name).symlink_to(medqa_dir / "textbooks" / "en" / name)
    (data / "questions").symlink_to(medqa_dir / "questions")
    build_index(data, root / "indexes", "en")
    return open_index(root / "indexes", "en", data_dir=data), data


@pytest.mark.parametrize(
    "question, options, answer",
    [
        ("Which vitamin deficiency causes Wernicke encephalopathy in alcoholics?",
         {"A": "Vitamin C", "B": "Niacin", "C": "Thiamine", "D": "Vitamin D"}, "C"),
        ("Which organism causes pseudomembranous colitis after antibiotic use?",
         {"A": "Clostridium difficile", "B": "Shigella", "C": "Vibrio cholerae", "D": "Giardia"}, "A"),
    ],
)
def test_answers_textbook_questions(engine, question, options, answer):
    index, _ = engine
    scorer = method("ir-custom").make(index, "usmle", IRSettings(top_n=1, query="full"))
    assert solve(scorer, make_question(question, options)).prediction() == answer


def test_real_dev_questions_score_above_chance(engine):
    index, data = engine
    questions = load_questions("us", "dev", data)[:300]
    scorer = method("ir-custom").make(index, "usmle", IRSettings(top_n=10, query="phrases"))
    summary = summarise(scorer.score(questions, progress=False))
    assert summary["n"] == 300
    assert summary["accuracy"] > 27.0
