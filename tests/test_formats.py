"""Other benchmarks' question files (MIRAGE JSON, MedMCQA JSON lines, MMLU CSV): read into the same
questions as MedQA's, with file:line errors, and scored by the IR baselines through ``openqa eval``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from openqa.cli import main
from openqa.data import read_question_file
from openqa.errors import DataError
from tests.helpers import make_data_dir

MIRAGE = {
    "medqa": {
        "0000": {"question": "Which drug blocks bacterial cell wall synthesis?",
                 "options": {"A": "Gentamicin", "B": "Ceftriaxone", "C": "Ciprofloxacin", "D": "Aspirin"}, "answer": "B"},
        "0001": {"question": "Which drug inhibits cyclooxygenase and reduces mortality after infarction?",
                 "options": {"A": "Aspirin", "B": "Gentamicin", "C": "Ceftriaxone", "D": "Ciprofloxacin"}, "answer": "A"},
    },
    "pubmedqa": {
        "12345": {"question": "Does aspirin reduce mortality after myocardial infarction?",
                  "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"},
    },
}


def write(path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_mirage_subsets(tmp_path):
    path = write(tmp_path / "benchmark.json", json.dumps(MIRAGE, indent=2))
    medqa = read_question_file(path, subset="medqa")
    assert [q.qid for q in medqa] == ["medqa-0000", "medqa-0001"] and medqa[0].answer == "Ceftriaxone"
    yes_no = read_question_file(path, subset="pubmedqa")
    assert list(yes_no[0].options.values()) == ["yes", "no", "maybe"] and yes_no[0].answer_idx == "A"
    with pytest.raises(DataError, match=r"2 datasets: pick one with --subset \(medqa, pubmedqa\)"):
        read_question_file(path)
    with pytest.raises(DataError, match="no dataset 'bioasq'"):
        read_question_file(path, subset="bioasq")


def test_a_large_mirage_file_on_one_line_is_read_whole(tmp_path, monkeypatch):
    """MIRAGE ships its five datasets as one JSON object on one line, far past the JSON-lines limit."""
    from openqa.data import formats
    from openqa.data.questions import MAX_LINE_BYTES

    case = "A 45-year-old woman comes to the emergency department because of crushing chest pain. " * 12
    datasets = {name: {f"{i:05d}": {"question": f"{case}Which is the next step? ({name} {i})",
                                    "options": {"A": "Aspirin", "B": "Heparin", "C": "Alteplase", "D": "Observation"},
                                    "answer": "ABCD"[i % 4]} for i in range(1000)}
                for name in ("mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq")}
    path = write(tmp_path / "benchmark.json", json.dumps(datasets))
    assert path.stat().st_size > 5_000_000 and path.read_bytes().count(b"\n") == 0 and path.stat().st_size > MAX_LINE_BYTES
    medqa = read_question_file(path, subset="medqa")
    assert len(medqa) == 1000 and medqa[999].qid == "medqa-00999" and medqa[999].answer_idx == "D"
    with pytest.raises(DataError, match=r"5 datasets: pick one with --subset \(mmlu, medqa, medmcqa, pubmedqa, bioasq\)"):
        read_question_file(path)
    monkeypatch.setattr(formats, "MAX_MIRAGE_BYTES", 1_000_000)
    with pytest.raises(DataError, match=r"benchmark.json:1: line longer than 1,048,576 bytes: not a question file \(nor a MIRAGE file of at most 1,000,000 bytes\)"):
        read_question_file(path, subset="medqa")


def test_medmcqa_and_mmlu(tmp_path):
    record = {"id": "x1", "question": "Drug of choice for gonococcal arthritis?", "opa": "Gentamicin",
              "opb": "Ceftriaxone", "opc": "Aspirin", "opd": "Ciprofloxacin", "cop": 2, "subject_name": "Micro"}
    medmcqa = read_question_file(write(tmp_path / "dev.json", json.dumps(record) + "\n"))
    assert medmcqa[0].answer_idx == "B" and medmcqa[0].answer == "Ceftriaxone" and medmcqa[0].qid == "dev-1"
    mmlu = read_question_file(write(tmp_path / "anatomy_test.csv", 'What inhibits COX?,Aspirin,"Gentamicin, IV",Ceftriaxone,Heparin,A\n'))
    assert mmlu[0].options["B"] == "Gentamicin, IV" and mmlu[0].answer == "Aspirin"
    headed = read_question_file(write(tmp_path / "h.csv", "question,A,B,C,D,answer\nQ?,a,b,c,d,D\n"))
    assert len(headed) == 1 and headed[0].answer == "d" and headed[0].qid == "h-2"


@pytest.mark.parametrize("name, text, message", [
    ("bad.json", json.dumps({"medqa": {"0000": {"question": "Q?", "options": {"A": "x", "B": "y"}, "answer": "C"}}}, indent=2),
     r"bad.json:3: medqa 0000: 'answer' 'C' is not one of the option letters A, B"),
    ("broken.json", '{"medqa": {\n  "0000": {"question": \n', r"broken.json:3: not valid JSON"),
    ("deep.json", '{\n"medqa": ' + "[" * 100_000 + "\n", r"deep.json: not valid JSON \(nested too deeply\)"),
    ("latin1.json", b'{\n"medqa": {"0000": {"question": "Caf\xe9?"}}}', r"latin1.json:2: not valid UTF-8"),
    ("long.jsonl", '[' + " " * (1 << 20) + "]\n", r"long.jsonl:1: line longer than 1,048,576 bytes: not a question file"),
    ("mc.json", json.dumps({"question": "Q?", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 0}) + "\n",
     r"mc.json:1: 'cop' 0 is not 1, 2, 3 or 4 \(cop counts from 1"),
    ("mc2.json", "\n" + json.dumps({"question": "Q?", "opa": "a", "opb": "b", "opc": "c", "opd": "d"}) + "\n",
     r"mc2.json:2: no answer \('cop'\)"),
    ("t.csv", "Q1?,a,b,c,d,A\nQ2?,a,b,c,d\n", r"t.csv:2: expected 6 columns"),
    ("u.csv", "Q1?,a,b,c,d,E\n", r"u.csv:1: 'answer' 'E' is not one of the option letters"),
    ("empty.csv", "\n", r"empty.csv: no questions"),
])
def test_bad_files_name_file_and_line(tmp_path, name, text, message):
    with pytest.raises(DataError, match=message):
        read_question_file(write(tmp_path / name, text))


def test_subset_needs_a_mirage_file(tmp_path):
    path = write(tmp_path / "q.csv", "Q1?,a,b,c,d,A\n")
    with pytest.raises(DataError, match="--subset picks a dataset of a MIRAGE benchmark file; this is a mmlu file"):
        read_question_file(path, subset="medqa")


def test_ir_baseline_scores_a_mirage_subset(tmp_path, capsys):
    data = make_data_dir(tmp_path)
    path = write(tmp_path / "benchmark.json", json.dumps(MIRAGE))
    where = ["--data-dir", str(data), "--index-dir", str(tmp_path / "indexes"), "--output", str(tmp_path / "out")]
    assert main(["eval", "--questions", str(path), "--subset", "medqa", "--top-n", "1", "--json", *where]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 2 and summary["accuracy"] == 100.0 and "medqa" in summary["variant"]
    assert main(["eval", "--questions", str(path), *where]) == 2
    assert "pick one with --subset" in capsys.readouterr().err


#: Questions whose options are mostly absent from the test corpus, so most of their best scores tie.
TIED = [
    {"question": f"Case {i}: a patient with septic arthritis of the knee. Which is the agent?",
     "options": {"A": f"Zorbamycin {i}", "B": f"Quellazine {i}", "C": f"Ceftriaxone {i}" if i % 3 == 0 else f"Vandotrex {i}",
                 "D": f"Plimsolate {i}"},
     "answer_idx": "ABCD"[i % 4]}
    for i in range(12)
]

#: One question set written in every supported format, each under two file names.
FILES = [(fmt, name) for fmt, names in {"medqa": ("us_test.jsonl", "copy.jsonl"), "mirage": ("benchmark.json", "mirage_copy.json"),
                                        "medmcqa": ("dev.json", "other.jsonl"), "mmlu": ("clinical_test.csv", "x.csv")}.items()
         for name in names]


def one_set_in_every_format(tmp_path):
    from openqa.data.formats import write_questions
    from openqa.data.questions import _parse_record

    questions = [_parse_record({**record, "answer": record["options"][record["answer_idx"]]}, f"t-{i}", 4)
                 for i, record in enumerate(TIED)]
    return questions, [write_questions(questions, tmp_path / name, fmt) for fmt, name in FILES]


def test_ties_depend_on_the_question_not_its_file(tmp_path):
    """Every option tied: the prediction is the tie rule alone, and it is the same in every file."""
    from openqa.scorers.base import OptionScores

    questions, paths = one_set_in_every_format(tmp_path)
    predictions = set()
    for path in paths:
        read = read_question_file(path)
        assert [(q.question, q.options, q.answer_idx) for q in read] == [(q.question, q.options, q.answer_idx) for q in questions]
        predictions.add(tuple(OptionScores(q, dict.fromkeys(q.options, 0.0)).prediction() for q in read))
    assert len({q.qid for path in paths for q in read_question_file(path)}) > len(questions)  # ids differ
    assert len(predictions) == 1 and len(set(next(iter(predictions)))) > 1  # one answer per question, not one letter


def test_every_format_and_name_gives_the_same_predictions(tmp_path, capsys):
    data = make_data_dir(tmp_path)
    _, paths = one_set_in_every_format(tmp_path)
    seen = {}
    for path in paths:
        out = tmp_path / f"out-{path.name}"
        assert main(["eval", "--questions", str(path), "--top-n", "1", "--json", "--data-dir", str(data),
                     "--index-dir", str(tmp_path / "indexes"), "--output", str(out)]) == 0
        summary = json.loads(capsys.readouterr().out)
        rows = [json.loads(line) for line in next(out.glob("*.predictions.jsonl")).read_text().splitlines()]
        seen[path.name] = (summary["accuracy"], summary["ties"]["questions_with_tied_best"], [r["prediction"] for r in rows])
    assert len(set(map(str, seen.values()))) == 1, seen
    assert next(iter(seen.values()))[1] >= 8  # the figure rests on ties


def test_messages_say_not_valid_json_in_one_form():
    """NC4: messages said both "invalid JSON" and "not valid JSON" (or "not JSON") for the same fault."""
    root = Path(__file__).resolve().parents[1]
    lines = [(path, number, line) for path in (*(root / "openqa").rglob("*.py"), *(root / "scripts").rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    said = [f"{path.relative_to(root)}:{number}" for path, number, line in lines  # scripts: their messages and checks
            if (path.is_relative_to(root / "openqa") or "SystemExit(" in line or "said(" in line)
            and re.search(r"""["'][^"']*(invalid JSON|: not JSON|is not JSON \()""", line)]
    assert not said, said
