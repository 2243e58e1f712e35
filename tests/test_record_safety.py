"""What keeps a figure what it says it is: a bank file that holds the questions scored is refused
before any work (by content, whatever the file's name), every choice that changes a figure is in
the result's name (``--bank`` files by their bytes), ``--exam`` is refused beside ``--dataset``,
``--bank`` is refused by a method that reads none, a run never replaces a record written with other
settings, and two runs of one name never both write it."""

from __future__ import annotations

import json
import os

import pytest

from openqa.errors import OpenQAError
from openqa.evaluate.results import refuse_replacing, result_lock
from tests.helpers import QUESTIONS, make_data_dir


def _where(tmp_path):
    return {"data_dir": make_data_dir(tmp_path), "index_dir": tmp_path / "indexes", "results_dir": tmp_path / "results"}


def test_a_bank_file_holding_the_questions_scored_is_refused_before_any_result(tmp_path, capsys):
    from openqa.api import run_eval, tune
    from openqa.cli import main

    where = _where(tmp_path)
    leak = tmp_path / "any-name.jsonl"  # the test split under another name, its options in another order
    leak.write_text("".join(json.dumps(_reordered(q)) + "\n" for q in QUESTIONS))
    fit = {k: v for k, v in where.items() if k != "results_dir"}
    tune("ensemble", "us", parts=["ir-custom", "bank"], ensemble="b", settings_dir=tmp_path / "tuned", banks=[leak],
         allow_bank_overlap=True, **fit)  # allowed for the fit: its use on test is refused all the same
    with pytest.raises(OpenQAError, match=r"^--bank any-name.jsonl holds 2 of the 2 questions scored"):
        run_eval("bank", "us", split="test", banks=[leak], **where)
    capsys.readouterr()
    code = main(["eval", "--dataset", "us", "--method", "ensemble", "--ensemble", "b", "--bank", str(leak),
                 "--data-dir", str(where["data_dir"]), "--index-dir", str(where["index_dir"]),
                 "--settings-dir", str(tmp_path / "tuned"), "--output", str(where["results_dir"])])
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after a note on the tiny corpus' settings
    assert code == 2 and error.startswith("openqa: error: --bank any-name.jsonl holds 2 of the 2")
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").glob("*.json"))
    with pytest.raises(OpenQAError, match="holds .* questions scored"):  # tune fits on dev: the same refusal
        tune("ensemble", "us", parts=["ir-custom", "bank"], ensemble="leak", banks=[leak], settings_dir=tmp_path / "t2", **fit)
    assert not (tmp_path / "t2").exists() or not list((tmp_path / "t2").glob("*.json"))
    allowed = run_eval("bank", "us", split="test", banks=[leak], allow_bank_overlap=True, **where).record
    assert allowed["bank_overlap"]["questions"] == allowed["n"]  # said in the record, and no copy was evidence
    texts = {q["question"] for q in QUESTIONS}
    assert not any(n["question"] in texts and n["qid"].startswith("bank-") for r in _predictions(allowed)
                   for n in r.get("solved_questions", []))


def _reordered(question):
    """``question`` with its option texts in reverse order under the same letters (the answer follows its text)."""
    letters, texts = list(question["options"]), list(question["options"].values())[::-1]
    answer = question["options"][question["answer_idx"]]
    return dict(question, options=dict(zip(letters, texts)), answer_idx=letters[texts.index(answer)])


def _predictions(record):
    path = record["files"]["summary"].removesuffix(".json") + ".predictions.jsonl"
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_result_names_hold_the_bank_files_by_content_and_never_replace_another_run(tmp_path):
    from openqa.api import run_eval

    where = _where(tmp_path)
    for folder in ("d1", "d2"):
        (tmp_path / folder).mkdir()
    near = [dict(q, question=q["question"] + " (course)") for q in QUESTIONS]
    (tmp_path / "d1" / "b.jsonl").write_text(json.dumps(near[0]) + "\n")
    (tmp_path / "d2" / "b.jsonl").write_text(json.dumps(near[1]) + "\n")
    one = run_eval("bank", "us", split="test", banks=[tmp_path / "d1" / "b.jsonl"], **where).record
    two = run_eval("bank", "us", split="test", banks=[tmp_path / "d2" / "b.jsonl"], **where).record
    plain = run_eval("bank", "us", split="test", **where).record
    names = {r["files"]["summary"] for r in (one, two, plain)}
    assert len(names) == 3  # one name each: the same file name in two folders holds other questions
    with pytest.raises(OpenQAError, match="give each file once"):
        run_eval("bank", "us", split="test", banks=[tmp_path / "d1" / "b.jsonl", tmp_path / "d1" / "b.jsonl"], **where)


def test_exam_beside_a_dataset_and_bank_for_a_method_without_one_are_refused(tmp_path):
    from openqa.api import run_eval

    where = _where(tmp_path)
    with pytest.raises(OpenQAError, match=r"^--exam applies to --questions"):
        run_eval("ir-custom", "us", split="dev", exam="twmle", **where)
    assert run_eval("ir-custom", "us", split="dev", exam="usmle", **where).record["n"] > 0  # its own exam: the same run
    bank = tmp_path / "b.jsonl"
    bank.write_text(json.dumps(dict(QUESTIONS[0], question="another question")) + "\n")
    for method in ("ir-custom", "ensemble"):  # the exam's own ensemble has no bank part
        with pytest.raises(OpenQAError, match=r"^--bank applies to a method that reads solved questions"):
            run_eval(method, "us", split="dev", banks=[bank], **where)


def test_a_record_with_other_settings_is_never_replaced(tmp_path):
    path = tmp_path / "us-dev-x.json"
    identity = {"dataset": "us", "split": "dev", "settings": {"top_n": 5, "sources": {"top_n": "a"}, "bank_sources": [1]}}
    refuse_replacing(path, identity)  # nothing there yet
    path.write_text(json.dumps({**identity, "accuracy": 30.0, "settings": {**identity["settings"], "sources": {"top_n": "b"}}}))
    refuse_replacing(path, identity)  # the same run (where a setting came from is not what it is): replaced
    refuse_replacing(path, {**identity, "settings": {"top_n": 5}})  # what one record lacks is not compared
    with pytest.raises(OpenQAError, match=r"^us-dev-x.json holds a run with another settings.bank_sources \(\[1\]; this run: \[1, 2\]\)"):
        refuse_replacing(path, {**identity, "settings": {**identity["settings"], "bank_sources": [1, 2]}})


def test_two_runs_of_one_name_never_both_write_it(tmp_path):
    with result_lock(tmp_path, "us-dev-ir-custom"):
        pid = os.fork()
        if pid == 0:  # another process asks for the same name while this one holds it
            try:
                with result_lock(tmp_path, "us-dev-ir-custom"):
                    os._exit(1)
            except OpenQAError as exc:
                os._exit(0 if "is being written" in str(exc) and "\n" not in str(exc) else 2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        with result_lock(tmp_path, "us-dev-pmi"):  # another name is free
            pass


def test_a_calibration_is_checked_against_the_settings_read_not_the_file_replaced_since(tmp_path):
    """A tune that replaces the pair between an opening's two reads: the new calibration is refused
    for the old settings instead of being used with them."""
    import hashlib

    from openqa.api import tune
    from openqa.tuning import load_calibration, reading_once, resolve_settings

    where = _where(tmp_path)
    tune("ir-custom", "us", settings_dir=tmp_path / "tuned", data_dir=where["data_dir"], index_dir=where["index_dir"])
    settings, calibration = tmp_path / "tuned" / "ir-custom-us.json", tmp_path / "tuned" / "ir-custom-us.calibration.json"

    def replaced_by_another_tune() -> None:
        record = json.loads(settings.read_text())
        record["chosen"]["top_n"] = record["chosen"]["top_n"] + 1
        settings.write_text(json.dumps(record))
        fitted = json.loads(calibration.read_text())
        fitted["settings_sha256"] = hashlib.sha256(settings.read_bytes()).hexdigest()
        calibration.write_text(json.dumps(fitted))

    with reading_once():
        chosen, _ = resolve_settings("ir-custom", "us", tmp_path / "tuned", {})
        replaced_by_another_tune()
        with pytest.raises(OpenQAError, match="was fitted with other settings"):
            load_calibration("ir-custom", "us", tmp_path / "tuned")
    with reading_once():  # a fresh opening reads the new pair whole: consistent
        assert resolve_settings("ir-custom", "us", tmp_path / "tuned", {})[0].top_n == chosen.top_n + 1
        assert load_calibration("ir-custom", "us", tmp_path / "tuned") is not None


def test_a_fitted_ensemble_remembers_its_bank_files_and_says_when_a_run_reads_others(tmp_path, capsys):
    from openqa.api import run_eval, tune

    where = _where(tmp_path)
    fit = {k: v for k, v in where.items() if k != "results_dir"}
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps(dict(QUESTIONS[0], question="a solved question of my own course")) + "\n")
    record = tune("ensemble", "us", parts=["ir-custom", "bank"], ensemble="mine", banks=[mine], settings_dir=tmp_path / "tuned", **fit).record
    assert record["banks"] == [{"file": "mine.jsonl", "sha256": record["banks"][0]["sha256"]}]
    from openqa.cli import main

    base = ["eval", "--dataset", "us", "--method", "ensemble", "--ensemble", "mine", "--data-dir", str(where["data_dir"]),
            "--index-dir", str(where["index_dir"]), "--settings-dir", str(tmp_path / "tuned"), "--output", str(where["results_dir"])]
    capsys.readouterr()
    note = "the ensemble mine: its bank part was fitted with --bank mine.jsonl (sha256 "
    assert main([*base, "--json"]) == 0  # used without its bank file: said, in one line and in the record
    out, err = capsys.readouterr()
    assert note in err and "this run reads the exam's own bank alone" in json.loads(out)["settings"]["sources"]["weights"]
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps(dict(QUESTIONS[0], question="another course's question")) + "\n")
    assert main([*base, "--bank", str(other), "--output", str(tmp_path / "o2")]) == 0
    assert "this run reads --bank other.jsonl" in capsys.readouterr().err
    assert main([*base, "--bank", str(mine), "--output", str(tmp_path / "o3")]) == 0
    assert "its bank part was fitted" not in capsys.readouterr().err  # the same files: nothing to say
    assert run_eval("bank", "us", split="test", banks=[mine], **where).record["n"] > 0


def test_run_eval_and_tune_take_what_the_command_line_does(tmp_path):
    """The API's parity with the commands: a slice, a named ensemble, a part read from a file; tune on the first N."""
    from openqa.api import run_eval, tune

    where = _where(tmp_path)
    fit = {k: v for k, v in where.items() if k != "results_dir"}
    tuned = tune("ensemble", "us", parts=["ir-custom", "bank"], ensemble="mine", limit=1, settings_dir=tmp_path / "tuned", **fit)
    assert tuned.record["limit"] == 1
    record = run_eval("ensemble", "us", split="test", ensemble="mine", offset=1, settings_dir=tmp_path / "tuned", **where).record
    assert (record["n"], record["offset"], record["settings"]["parts"]) == (1, 1, ["ir-custom", "bank"])
    with pytest.raises(OpenQAError, match="predictions must map part labels to files"):
        run_eval("ensemble", "us", predictions=["x"], **where)
    with pytest.raises(OpenQAError, match="--exam is empty"):
        run_eval("ir-custom", questions=tmp_path / "q.jsonl", exam=" ", **where)
