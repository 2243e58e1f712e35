"""``openqa tune --questions FILE``: settings fitted on a user's own solved questions (any format
``eval --questions`` reads) instead of a dataset's dev split, filed as the settings of the exam the
questions are scored as (over the named corpus), where later runs on that exam and corpus find
them; its records name the file by name and SHA-256, and every bad input is refused in one line
before anything is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from openqa.api import Workspace, build_index, run_eval, tune
from openqa.cli import main
from openqa.errors import OpenQAError, UsageError
from tests.helpers import BOOKS, QUESTIONS, make_data_dir

#: Two solved questions of the tiny books, in none of the MedQA splits of the fixture.
SOLVED = [
    {"question": "Which aminoglycoside inhibits the 30S ribosomal subunit?",
     "options": {"A": "Aspirin", "B": "Gentamicin"}, "answer_idx": "B"},
    {"question": "Which drug inhibits DNA gyrase in urinary tract infections?",
     "options": {"A": "Ciprofloxacin", "B": "Ceftriaxone"}, "answer_idx": "A"},
]


def lines(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, dict]:
    """A tiny data folder with its custom index, a file of solved questions and where tuning and results go."""
    root = tmp_path_factory.mktemp("tune-questions")
    where = {"data_dir": make_data_dir(root), "index_dir": root / "indexes", "results_dir": root / "results"}
    build_index("en", "custom", **where)
    (root / "solved.jsonl").write_text(lines(SOLVED))
    return root, where


def test_a_fit_on_a_question_file_is_filed_as_its_exams_settings_and_names_the_file(site, tmp_path):
    root, where = site
    where = {**where, "results_dir": tmp_path / "results"}
    solved = root / "solved.jsonl"
    digest = hashlib.sha256(solved.read_bytes()).hexdigest()
    tuned = tune("ir-custom", questions=solved, lang="en", settings_dir=tmp_path, **where)
    assert tuned.files == {"settings": str(tmp_path / "ir-custom-us.json"), "calibration": str(tmp_path / "ir-custom-us.calibration.json")}
    for path in tuned.files.values():
        record = json.loads(Path(path).read_text())
        assert (record["dataset"], record["split"], record["questions"]) == ("us", "file", {"file": "solved.jsonl", "sha256": digest})
    assert tuned.record["exam"] == "usmle" and tuned.chosen is not None
    calibration = json.loads(Path(tuned.files["calibration"]).read_text())
    assert calibration["dev"]["n"] == 2 and calibration["calibration"]["dataset"] == f"solved.jsonl (sha256 {digest[:16]})"

    later = run_eval("ir-custom", questions=solved, lang="en", settings_dir=tmp_path, **where).record
    sources = later["settings"]["sources"]
    assert sources["top_n"] == f"your openqa tune: {tmp_path.name}/ir-custom-us.json"
    assert sources["probabilities"] == f"your openqa tune: {tmp_path.name}/ir-custom-us.calibration.json"
    assert later["settings"]["top_n"] == tuned.chosen["top_n"] and later["settings"]["query"] == tuned.chosen["query"]
    assert f"fitted on solved.jsonl (sha256 {digest[:16]}) (2 questions" in later["settings"]["probabilities"]


def test_exam_says_whose_settings_the_fit_replaces(site, tmp_path):
    root, where = site
    where = {**where, "results_dir": tmp_path / "results"}
    tuned = tune("ir-custom", questions=root / "solved.jsonl", lang="en", exam="twmle", settings_dir=tmp_path, **where)
    assert Path(tuned.files["settings"]).name == "ir-custom-tw-en.json" and tuned.record["exam"] == "twmle"
    as_twmle = run_eval("ir-custom", questions=root / "solved.jsonl", lang="en", exam="twmle", settings_dir=tmp_path, **where)
    assert as_twmle.record["settings"]["sources"]["top_n"] == f"your openqa tune: {tmp_path.name}/ir-custom-tw-en.json"
    as_usmle = run_eval("ir-custom", questions=root / "solved.jsonl", lang="en", settings_dir=tmp_path, **where)
    assert as_usmle.record["settings"]["sources"]["top_n"].startswith("shipped with openqa")  # another exam's, untouched


def test_a_named_corpus_is_tuned_on_questions_without_medqa_data(tmp_path, capsys):
    """A user with their own corpus and questions and no MedQA data folder: before the tune, the
    note names ``tune --questions`` for their corpus; after it, answer uses the fit, silently."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, paragraphs in BOOKS.items():
        (notes / f"{name}.md").write_text("\n\n".join(paragraphs) + "\n")
    (tmp_path / "quiz.jsonl").write_text(lines(SOLVED))
    loc = ["--index-dir", str(tmp_path / "indexes"), "--settings-dir", str(tmp_path / "tuned")]
    (tmp_path / "tuned").mkdir()
    assert main(["index", "--lang", "en", "--corpus", str(notes), "--name", "mine", *loc]) == 0
    ask = ["answer", "--corpus", "mine", "--json", "--question", SOLVED[0]["question"], "--option", "A=Aspirin",
           "--option", "B=Gentamicin", *loc]
    capsys.readouterr()
    assert main(ask) == 0
    before = capsys.readouterr()
    assert ("retune on questions you hold the answers of: openqa tune --method ir-custom --questions FILE --lang en "
            "--corpus mine") in before.err
    assert main(["tune", "--questions", str(tmp_path / "quiz.jsonl"), "--lang", "en", "--corpus", "mine", *loc]) == 0
    done = capsys.readouterr().out
    assert "fitted on quiz.jsonl (sha256 " in done and "eval and answer scoring usmle questions over corpus mine" in done
    assert (tmp_path / "tuned" / "ir-custom-us-corpus-mine.json").is_file()
    assert main(ask) == 0
    after = capsys.readouterr()
    assert "openqa:" not in after.err
    assert json.loads(after.out)["settings"]["sources"]["top_n"] == "your openqa tune: tuned/ir-custom-us-corpus-mine.json"


def refusal(args: list[str], capsys) -> str:
    """The one line ``openqa ARGS`` (run in this process) fails with, exit status 2."""
    capsys.readouterr()
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_every_bad_question_file_or_flag_is_one_line_before_anything_is_written(site, tmp_path, capsys):
    root, where = site
    loc = ["--data-dir", str(where["data_dir"]), "--index-dir", str(where["index_dir"]), "--settings-dir", str(tmp_path)]
    files = {
        "garbled.jsonl": '{"question": "Which drug?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}\n{not json\n',
        "unsolved.jsonl": '{"question": "Which drug?", "options": {"A": "x", "B": "y"}}\n',
        "empty.jsonl": "",
        "short.csv": "Which drug?,x,y,z,A\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    bank = tmp_path / "bank.jsonl"
    bank.write_text(lines(SOLVED))
    cases = {
        ("--questions", str(tmp_path / "missing.jsonl")): "missing.jsonl",
        ("--questions", str(tmp_path / "garbled.jsonl")): "garbled.jsonl:2: not valid JSON",
        ("--questions", str(tmp_path / "unsolved.jsonl")): "unsolved.jsonl:1: 'answer_idx' None is not one of the option letters",
        ("--questions", str(tmp_path / "empty.jsonl")): "empty.jsonl: no questions",
        ("--questions", str(tmp_path / "short.csv")): "short.csv:1: expected 6 columns",
        ("--questions", ""): "--questions must name a path",
        ("--questions", str(root / "solved.jsonl"), "--limit", "0"): "--limit must be at least 1",
        ("--questions", str(root / "solved.jsonl"), "--exam", " "): "--exam is empty",
        ("--questions", str(root / "solved.jsonl"), "--exam", "nonsense"): "no en dataset for exam 'nonsense'",
        ("--questions", str(root / "solved.jsonl"), "--method", "bank", "--bank", str(bank)):
            "--bank bank.jsonl holds 2 of the 2 questions scored",
        ("--dataset", "us", "--subset", "medqa"): "--subset picks a dataset of a MIRAGE --questions file",
        ("--dataset", "us", "--lang", "zh"): "--lang zh does not apply to --dataset us",
        ("--dataset", "us", "--exam", "mcmle"): "--exam applies to --questions",
    }
    for args, message in cases.items():
        assert message in refusal(["tune", *args, *loc], capsys), args
    assert list(tmp_path.glob("*.json")) == []  # no record of any of them
    capsys.readouterr()
    with pytest.raises(SystemExit) as both:  # the flags' grammar: one source or the other
        main(["tune", "--dataset", "us", "--questions", str(root / "solved.jsonl"), *loc])
    assert both.value.code == 2 and "argument --questions: not allowed with argument --dataset" in capsys.readouterr().err


def test_the_api_checks_its_arguments_as_the_command_does(site, tmp_path):
    root, where = site
    fit = {**where, "settings_dir": tmp_path}
    with pytest.raises(OpenQAError, match="give --dataset or --questions"):
        tune("ir-custom", "us", questions=root / "solved.jsonl", **fit)
    with pytest.raises(UsageError, match="questions must be a path"):
        tune("ir-custom", questions=3, **fit)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown language"):
        tune("ir-custom", questions=root / "solved.jsonl", lang="xx", **fit)
    with pytest.raises(OpenQAError, match="--subset picks"):
        tune("ir-custom", subset="medqa", **fit)
    with pytest.raises(OpenQAError, match="no questions"):
        (tmp_path / "empty.jsonl").write_text("")
        tune("ir-custom", questions=tmp_path / "empty.jsonl", **fit)
    assert list(tmp_path.glob("*.json")) == []
    dev = tune("ir-custom", workspace=Workspace(settings_dir=tmp_path, **where), calibrate_only=True)  # no source: us dev
    assert (dev.record["dataset"], dev.record["split"], "questions" in dev.record) == ("us", "dev", False)
    assert dev.record["calibration"]["n"] == len(QUESTIONS)
