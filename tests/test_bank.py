"""The question bank and the bank method: nearest solved questions by TF-IDF cosine (checked against
a cosine worked out by hand), votes weighted by similarity, leave-one-out on dev, train splits where
the data has them, ``--bank`` files, disclosure in records, and one-line refusals."""

from __future__ import annotations

import json
import math

import pytest

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.scorers.bank import MATCHES, BankScorer, QuestionBank, disclosure, votes
from tests.helpers import QUESTIONS, make_data_dir


def q(qid: str, text: str, options: dict[str, str], answer: str) -> Question:
    return Question(qid, text, options, answer, options[answer])


OPTS = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Ceftriaxone"}


class Words:
    """A tokenizer of whitespace-split words, so the hand-worked cosine below is easy to follow."""

    def tokenize(self, text: str) -> list[str]:
        return text.split()


def bank_of(*questions: Question) -> QuestionBank:
    return QuestionBank(list(questions), "en")


def test_similarity_is_the_tf_idf_cosine_worked_by_hand(monkeypatch):
    monkeypatch.setattr("openqa.scorers.bank.bank_tokenizer", lambda lang: Words())
    rows = [q("b-1", "alpha beta", OPTS, "A"), q("b-2", "alpha gamma", OPTS, "B")]
    bank = QuestionBank(rows, "en")
    # df: alpha 2, beta 1, gamma 1; idf = ln((1+2)/(1+df)) + 1
    idf_alpha, idf_once = math.log(3 / 3) + 1, math.log(3 / 2) + 1
    # the query "alpha beta" against row 1 "alpha beta": the same vector, cosine 1;
    # against row 2 "alpha gamma": only alpha is shared
    cos2 = idf_alpha**2 / (idf_alpha**2 + idf_once**2)
    # (other options, b-1's answer not among them: the same stem, not a copy of b-1)
    found = bank.nearest(q("new", "alpha beta", {"A": "Other", "B": "Heparin"}, "A"), 2)
    assert [n.question.qid for n in found] == ["b-1", "b-2"]
    assert found[0].similarity == pytest.approx(1.0)
    assert found[1].similarity == pytest.approx(cos2)


def test_votes_sum_the_similarity_of_neighbours_whose_answer_is_an_option():
    rows = [q("b-1", "chest pain aspirin jaw", OPTS, "A"), q("b-2", "chest pain heparin", OPTS, "B"),
            q("b-3", "unrelated words entirely", {"A": "Gentamicin", "B": "Other"}, "A")]
    bank = bank_of(*rows)
    asked = q("new", "chest pain aspirin jaw now", {"A": "Heparin", "B": "Aspirin", "C": "X", "D": "Y"}, "B")
    near = bank.nearest(asked, 3)
    scores = votes(asked, near, "exact")
    by_id = {n.question.qid: n.similarity for n in near}
    assert scores == pytest.approx({"A": by_id["b-2"], "B": by_id["b-1"], "C": 0.0, "D": 0.0})
    assert BankScorer(bank, 3, "exact").score_one(asked).prediction() == "B"


def test_matching_modes():
    assert MATCHES["exact"]("Aspirin", " Aspirin ")
    assert not MATCHES["exact"]("aspirin.", "Aspirin")
    assert MATCHES["normalized"]("aspirin.", "Aspirin")
    assert not MATCHES["normalized"]("aspirin tablets", "Aspirin")
    assert MATCHES["fuzzy"]("Acetylsalicylic acid", "acetylsalicylic acids")
    assert not MATCHES["fuzzy"]("Heparin", "Aspirin")


def test_a_question_never_finds_a_copy_of_itself_whatever_its_id_or_options():
    me = q("dev-1", "fever cough chest pain", OPTS, "C")
    twin = q("dev-2", "fever cough chest pain", OPTS, "C")
    other = q("dev-3", "headache vomiting chest", OPTS, "D")
    bank = bank_of(me, twin, other)
    assert [n.question.qid for n in bank.nearest(me, 3)] == ["dev-3"]  # neither its own row nor its verbatim twin
    # the same question under another id, with an option more and the order changed: still a copy
    more = q("test-9", me.question, {"A": "Warfarin", "B": "Aspirin", "C": "Heparin", "D": "Ceftriaxone", "E": "Other"}, "A")
    assert [n.question.qid for n in bank.nearest(more, 3)] == ["dev-3"]
    assert bank.verbatim([more, q("t-1", "nothing alike", OPTS, "A")])["questions"] == 1
    # the same stem with other options (the bank's answer is not among them): another question, found
    stem = q("test-8", me.question, {"A": "Insulin", "B": "Metformin"}, "A")
    assert bank.nearest(stem, 1)[0].question.qid == "dev-1"
    # a near copy (other words) counts: it is disclosed by its similarity, not hidden
    assert bank.nearest(q("test-7", me.question + " today", OPTS, "C"), 1)[0].question.qid in ("dev-1", "dev-2")


def test_copies_are_counted_by_source_and_a_bank_file_holding_them_is_refused():
    from openqa.scorers.bank import checked_overlap

    dev = [q("dev-1", "fever cough chest pain", OPTS, "C"), q("dev-2", "headache vomiting", OPTS, "D")]
    mine = [q("f-1", "fever cough chest pain", OPTS, "C")]
    sources = [{"dataset": "us", "split": "dev", "questions": 2}, {"file": "mine.jsonl", "sha256": "ab", "questions": 1}]
    bank = QuestionBank(dev + mine, "en", sources)
    overlap = bank.verbatim(dev)
    assert (overlap["questions"], overlap["of"]) == (2, 2)
    assert overlap["by_source"] == [{**sources[0], "holds": 2}, {**sources[1], "holds": 1}]
    with pytest.raises(OpenQAError, match=r"^--bank mine.jsonl holds 1 of the 2 questions scored .*--allow-bank-overlap"):
        checked_overlap([bank], dev)
    allowed = checked_overlap([bank], dev, allowed=True)["bank_overlap"]
    assert allowed["questions"] == 2 and "(it was)" in allowed["rule"]
    # the exam's own splits are never refused: their copies are left out, and counted
    assert checked_overlap([QuestionBank(dev, "en", sources[:1])], dev)["bank_overlap"]["questions"] == 2
    assert checked_overlap([], dev) == {}


def test_a_question_answer_depends_on_it_alone():
    bank = bank_of(*(q(f"b-{i}", f"word{i} shared text", OPTS, "ABCD"[i % 4]) for i in range(8)))
    scorer = BankScorer(bank, 3, "normalized")
    asked = [q(f"t-{i}", f"word{i} shared text extra", OPTS, "A") for i in range(8)]
    together = [r.scores for r in scorer.score(asked, progress=False)]
    assert together == [scorer.score([a], progress=False)[0].scores for a in asked]
    assert together[::-1] == [r.scores for r in scorer.score(asked[::-1], progress=False)]


def test_refusals_are_one_line():
    with pytest.raises(OpenQAError, match="not among its options"):
        QuestionBank([Question("x-1", "text", OPTS, "", "")], "en")
    with pytest.raises(OpenQAError, match="not in the language asked for"):
        QuestionBank([q("x-1", "患者胸痛", OPTS, "A")], "en")
    with pytest.raises(OpenQAError, match="not in the language asked for"):
        QuestionBank([q("x-1", "chest pain", OPTS, "A")], "zh")
    with pytest.raises(OpenQAError, match="empty"):
        QuestionBank([], "en")
    with pytest.raises(OpenQAError, match="unknown answer matching"):
        BankScorer(bank_of(q("x-1", "chest pain", OPTS, "A")), 3, "loose")
    with pytest.raises(OpenQAError, match="at least 1"):
        BankScorer(bank_of(q("x-1", "chest pain", OPTS, "A")), 0, "exact")


def test_disclosure_counts_questions_by_their_nearest_similarity():
    bank = bank_of(q("b-1", "chest pain aspirin", OPTS, "A"), q("b-2", "fever cough", OPTS, "B"))
    scorer = BankScorer(bank, 1, "exact")
    near = q("t-1", "chest pain aspirin.", OPTS, "A")  # the same words, not the same text: no copy, similarity 1
    results = scorer.score([near, q("t-2", "nothing alike here", OPTS, "C")], progress=False)
    rows = disclosure(results)["nearest_similarity_at_least"]
    assert rows["0.9"] == {"questions": 1, "accuracy": 100.0, "rest": 1, "rest_accuracy": rows["0.9"]["rest_accuracy"]}
    assert rows["0.3"]["questions"] == 1 and rows["0.3"]["rest"] == 1


def _train_fixture(data):
    """A train split beside dev and test (the real release has them; this copy does not)."""
    folder = data / "questions" / "US" / "4_options"
    twin = dict(QUESTIONS[0], question=QUESTIONS[0]["question"] + " (train)")
    (folder / "phrases_no_exclude_train.jsonl").write_text(json.dumps(twin) + "\n")


def test_the_bank_method_reads_dev_train_and_bank_files(tmp_path):
    from openqa.api import run_eval

    data = make_data_dir(tmp_path)
    _train_fixture(data)
    extra = tmp_path / "course.jsonl"
    extra.write_text(json.dumps(dict(QUESTIONS[1], question=QUESTIONS[1]["question"] + " (course)")) + "\n")
    where = {"data_dir": data, "index_dir": tmp_path / "indexes", "results_dir": tmp_path / "results"}
    record = run_eval("bank", "us", split="test", banks=[extra], **where).record
    assert record["bank"]["size"] == 2 + 1 + 1
    assert [s.get("split") or s.get("file") for s in record["bank"]["sources"]] == ["dev", "train", "course.jsonl"]
    assert record["settings"]["sources"]["bank_sources"] == "--bank"
    # each test question's copy in dev is left out (and counted); a near twin in train or the file answers it
    assert record["bank_overlap"]["questions"] == record["n"]
    assert record["accuracy"] == 100.0


def test_a_bank_file_is_read_once_a_run_and_again_once_it_changes(tmp_path, monkeypatch):
    """The result's name, the duplicate check and the bank take one read of a ``--bank`` file (a file
    rewritten since is read again: its digest is the new bytes')."""
    import builtins
    import io
    import os

    from openqa.api import run_eval

    data = make_data_dir(tmp_path)
    extra = tmp_path / "course.jsonl"
    reads = []
    opened = io.open

    def counted(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) == str(extra):
            reads.append(file)
        return opened(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counted)
    monkeypatch.setattr(io, "open", counted)
    extra.write_text(json.dumps(dict(QUESTIONS[1], question=QUESTIONS[1]["question"] + " (course)")) + "\n")
    where = {"data_dir": data, "index_dir": tmp_path / "indexes", "results_dir": tmp_path / "results"}
    first = run_eval("bank", "us", split="test", banks=[extra], **where).record
    assert len(reads) == 1
    extra.write_text(json.dumps(dict(QUESTIONS[1], question=QUESTIONS[1]["question"] + " (course, again)")) + "\n")
    os.utime(extra, ns=(1, 1))  # another time, whatever the clock's resolution
    second = run_eval("bank", "us", split="test", banks=[extra], **where).record
    assert len(reads) == 2
    assert first["bank"]["sources"][-1]["sha256"] != second["bank"]["sources"][-1]["sha256"]


def test_a_bank_file_of_the_other_language_is_refused_beside_the_exams_bank(tmp_path):
    """One Chinese file beside an English exam's dev questions (here two to one) is not outvoted: each file is checked alone."""
    from openqa.api import run_eval

    data = make_data_dir(tmp_path)
    chinese = tmp_path / "zh.jsonl"
    chinese.write_text(json.dumps({"question": "患者胸痛", "options": {"A": "阿司匹林", "B": "肝素"}, "answer_idx": "A"}) + "\n")
    with pytest.raises(OpenQAError, match=r"^--bank .*zh.jsonl is not in the language asked for \(en\): 100% of its questions"):
        run_eval("bank", "us", split="test", banks=[chinese], data_dir=data, index_dir=tmp_path / "indexes",
                 results_dir=tmp_path / "results")


def test_the_bank_method_without_a_train_split_uses_dev(tmp_path):
    from openqa.api import Solver

    data = make_data_dir(tmp_path)
    solver = Solver.open("bank", "en", data_dir=data, index_dir=tmp_path / "indexes")
    answer = solver.answer(QUESTIONS[1]["question"] + " (asked again)", QUESTIONS[1]["options"])
    assert answer.prediction == "A"
    shown = answer.to_dict()["details"]["solved_questions"]
    assert shown[0]["answer"] == "Aspirin" and shown[0]["similarity"] > 0.5
    # the question itself: its own row in dev is never its evidence
    itself = solver.answer(QUESTIONS[1]["question"], QUESTIONS[1]["options"]).to_dict()["details"]["solved_questions"]
    assert all(n["question"] != QUESTIONS[1]["question"] for n in itself)


def test_a_bank_file_without_answers_is_refused_in_one_line(tmp_path, capsys):
    from openqa.cli import main

    data = make_data_dir(tmp_path)
    bad = tmp_path / "bad.jsonl"
    record = {k: v for k, v in QUESTIONS[0].items() if k not in ("answer", "answer_idx")}
    bad.write_text(json.dumps(record) + "\n")
    code = main(["eval", "--dataset", "us", "--method", "bank", "--bank", str(bad), "--data-dir", str(data),
                 "--index-dir", str(tmp_path / "indexes"), "--output", str(tmp_path / "out")])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("openqa: error: ") and "bad.jsonl" in error and "\n" not in error
    code = main(["eval", "--dataset", "us", "--method", "bank", "--bank", str(tmp_path / "missing.jsonl"),
                 "--data-dir", str(data), "--index-dir", str(tmp_path / "indexes"), "--output", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.strip() == (f"openqa: error: --bank {tmp_path / 'missing.jsonl'}: no such file "
                                               "(give a question file with answers)")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.json"))


def test_eval_reads_a_train_split_where_the_data_folder_has_one(tmp_path):
    from openqa.api import run_eval

    data = make_data_dir(tmp_path)
    where = {"data_dir": data, "index_dir": tmp_path / "indexes", "results_dir": tmp_path / "results"}
    with pytest.raises(OpenQAError, match="your data folder has no us train split"):
        run_eval("ir-custom", "us", split="train", **where)
    _train_fixture(data)
    record = run_eval("ir-custom", "us", split="train", **where).record
    assert (record["split"], record["n"]) == ("train", 1)


def test_an_ensemble_with_a_bank_part_shows_the_solved_questions_through_the_api_and_answer(tmp_path, capsys):
    from openqa.api import Solver, tune
    from openqa.cli import main

    data = make_data_dir(tmp_path)
    where = {"data_dir": data, "index_dir": tmp_path / "indexes", "settings_dir": tmp_path / "tuned"}
    tune("ensemble", "us", parts=["ir-custom", "bank"], ensemble="bank", **where)
    solver = Solver.open("ensemble", "en", ensemble="bank", **where)
    answer = solver.answer(QUESTIONS[1]["question"] + " (asked again)", QUESTIONS[1]["options"])
    assert answer.settings["parts"] == ["ir-custom", "bank"]
    assert answer.solved_questions[0]["answer"] == "Aspirin"
    code = main(["answer", "--method", "ensemble", "--ensemble", "bank", "--question", QUESTIONS[1]["question"] + " (asked again)",
                 *[f"--option={k}={v}" for k, v in QUESTIONS[1]["options"].items()], "--json",
                 "--data-dir", str(data), "--index-dir", str(tmp_path / "indexes"), "--settings-dir", str(tmp_path / "tuned")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["details"]["solved_questions"][0]["qid"].startswith("us-")


def test_a_damaged_train_split_is_refused_not_skipped(tmp_path):
    from openqa.api import run_eval

    data = make_data_dir(tmp_path)
    (data / "questions" / "US" / "4_options" / "phrases_no_exclude_train.jsonl").write_text("{not json\n")
    with pytest.raises(OpenQAError, match="phrases_no_exclude_train.jsonl:1"):
        run_eval("bank", "us", split="test", data_dir=data, index_dir=tmp_path / "indexes", results_dir=tmp_path / "r")
