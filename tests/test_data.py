"""Tests for openqa.data: validating reader, dataset registry, loading and the dev split for training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openqa.data import (
    DATASETS,
    SPLITS,
    Question,
    load_questions,
    parse_train_split,
    read_question_file,
    split_questions,
)
from openqa.errors import DataError, OpenQAError


def record(**overrides) -> dict:
    """A valid 4-option MedQA record, with fields replaced or removed (value None) as asked."""
    base = {
        "question": "Which drug blocks cell wall synthesis?",
        "options": {"A": "Gentamicin", "B": "Ciprofloxacin", "C": "Ceftriaxone", "D": "Trimethoprim"},
        "answer": "Ceftriaxone",
        "meta_info": "step1",
        "answer_idx": "C",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write raw lines to a file and return its path."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_records(path: Path, records: list[dict]) -> Path:
    """Write records as JSONL and return the path."""
    return write_lines(path, [json.dumps(r, ensure_ascii=False) for r in records])


def make_question(i: int) -> Question:
    """A synthetic question for split tests."""
    return Question(qid=f"q-{i}", question=f"q{i}", options={"A": "x", "B": "y"}, answer_idx="A", answer="x")


# --- read_question_file: valid input -----------------------------------------------------------


def test_round_trip_keeps_fields_order_and_phrases(tmp_path: Path) -> None:
    first = record(metamap_phrases=["cell wall", "drug"])
    second = record(
        question="问题二",
        options={"A": "丙", "B": "甲", "C": "乙", "D": "丁"},
        answer="乙",
        answer_idx="C",
        meta_info="医学",
    )
    path = write_records(tmp_path / "sample_dev.jsonl", [first, second])

    questions = read_question_file(path)

    assert [q.qid for q in questions] == ["sample_dev-1", "sample_dev-2"]
    q1, q2 = questions
    assert q1.question == first["question"]
    assert list(q1.options) == ["A", "B", "C", "D"]
    assert list(q1.options.values()) == ["Gentamicin", "Ciprofloxacin", "Ceftriaxone", "Trimethoprim"]
    assert (q1.answer_idx, q1.answer, q1.meta_info) == ("C", "Ceftriaxone", "step1")
    assert q1.metamap_phrases == ("cell wall", "drug")
    assert list(q2.options.values()) == ["丙", "甲", "乙", "丁"]
    assert q2.metamap_phrases is None
    assert q2.answer == "乙"


def test_to_dict_is_json_ready(tmp_path: Path) -> None:
    path = write_records(tmp_path / "f.jsonl", [record(metamap_phrases=["a"])])
    (q,) = read_question_file(path, qid_prefix="us-dev")

    data = json.loads(json.dumps(q.to_dict()))

    assert data == {
        "qid": "us-dev-1",
        "question": q.question,
        "options": q.options,
        "answer_idx": "C",
        "answer": "Ceftriaxone",
        "meta_info": "step1",
        "metamap_phrases": ["a"],
    }


def test_blank_lines_are_skipped_and_qids_keep_line_numbers(tmp_path: Path) -> None:
    line = json.dumps(record())
    path = write_lines(tmp_path / "blanks.jsonl", ["", line, "   ", "", line, ""])

    questions = read_question_file(path, qid_prefix="x")

    assert [q.qid for q in questions] == ["x-2", "x-5"]


def test_answer_compared_after_stripping_and_optional(tmp_path: Path) -> None:
    path = write_records(
        tmp_path / "f.jsonl",
        [record(answer="  Ceftriaxone \n"), record(answer=None, answer_idx="A")],
    )

    q1, q2 = read_question_file(path)

    assert q1.answer == "Ceftriaxone"
    assert q2.answer == "Gentamicin"


def test_n_options_accepts_matching_count(tmp_path: Path) -> None:
    path = write_records(tmp_path / "f.jsonl", [record()])
    assert len(read_question_file(path, n_options=4)) == 1


# --- read_question_file: bad input ------------------------------------------------------------

BAD_LINES = {
    "invalid_json": ('{"question": "x", ', "not valid JSON"),
    "not_object": (json.dumps([1, 2]), "JSON object"),
    "missing_question": (json.dumps(record(question=None)), "question"),
    "empty_question": (json.dumps(record(question="  ")), "question"),
    "options_not_dict": (json.dumps(record(options=["a", "b"])), "options"),
    "options_empty": (json.dumps(record(options={})), "options"),
    "option_empty_text": (json.dumps(record(options={"A": "a", "B": "", "C": "c", "D": "d"})), "option 'B'"),
    "option_not_string": (json.dumps(record(options={"A": "a", "B": 2, "C": "c", "D": "d"})), "option 'B'"),
    "option_letters_wrong": (
        json.dumps(record(options={"A": "a", "C": "Ceftriaxone", "D": "d", "E": "e"})),
        "option letters",
    ),
    "answer_idx_missing": (json.dumps(record(answer_idx=None)), "answer_idx"),
    "answer_idx_not_letter": (json.dumps(record(answer_idx="F")), "answer_idx"),
    "answer_idx_not_string": (json.dumps(record(answer_idx=["C"])), "answer_idx"),
    "answer_mismatch": (json.dumps(record(answer="Gentamicin")), "'answer'"),
    "answer_not_string": (json.dumps(record(answer=3)), "'answer'"),
    "meta_info_not_string": (json.dumps(record(meta_info=["step1"])), "meta_info"),
    "phrases_not_list": (json.dumps(record(metamap_phrases="fever")), "metamap_phrases"),
    "phrases_not_strings": (json.dumps(record(metamap_phrases=["fever", 1])), "metamap_phrases"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_record_names_file_and_line(tmp_path: Path, case: str) -> None:
    bad_line, what = BAD_LINES[case]
    path = write_lines(tmp_path / f"bad_{case}.jsonl", [json.dumps(record()), bad_line])

    with pytest.raises(DataError) as info:
        read_question_file(path)

    message = str(info.value)
    assert message.startswith(f"{path}:2: ")
    assert what in message
    assert "\n" not in message


def test_a_question_made_in_code_without_options_is_refused() -> None:
    """What a file's reader refuses (``options_empty`` above) is refused when a caller builds the
    ``Question`` itself too: scoring one used to fail deep in numpy ("zero-size array")."""
    with pytest.raises(DataError, match=r"^question q-1: no options"):
        Question("q-1", "Which drug blocks cell wall synthesis?", {}, "A", "")


def test_option_count_mismatch(tmp_path: Path) -> None:
    path = write_records(tmp_path / "five.jsonl", [record()])

    with pytest.raises(DataError, match=r"five\.jsonl:1: expected 5 options, found 4"):
        read_question_file(path, n_options=5)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(record()).encode() + b"\n" + b'{"question": "caf\xe9"}\n')

    with pytest.raises(DataError, match=r"latin1\.jsonl:2: not valid UTF-8"):
        read_question_file(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.jsonl"

    with pytest.raises(DataError) as info:
        read_question_file(path)

    assert str(info.value) == f"{path}: file not found"


@pytest.mark.parametrize("content", ["", "\n  \n\n"])
def test_file_without_questions(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(DataError) as info:
        read_question_file(path)

    assert str(info.value) == f"{path}: no questions"


# --- registry and load_questions --------------------------------------------------------------


def test_registry_names_and_fields() -> None:
    assert set(DATASETS) == {"us", "us5", "tw-en", "tw-zh", "tw", "mainland", "mainland5"}
    assert SPLITS == ("train", "dev", "test")
    for name, spec in DATASETS.items():
        assert spec.name == name
        assert spec.lang in ("en", "zh")
        assert spec.n_options in (4, 5)
        assert set(spec.files) == set(SPLITS)
        assert spec.description
    assert {n for n, s in DATASETS.items() if s.lang == "en"} == {"us", "us5", "tw-en"}
    assert {n for n, s in DATASETS.items() if s.n_options == 5} == {"us5", "mainland5"}


def fake_data_dir(tmp_path: Path, dataset: str, splits: tuple[str, ...]) -> Path:
    """A data folder holding a one-question file for each named split of a dataset."""
    spec = DATASETS[dataset]
    for split in splits:
        path = tmp_path / "questions" / spec.files[split]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_records(path, [record(question=f"{split} question")])
    return tmp_path


def test_load_questions_uses_dataset_file_and_qids(tmp_path: Path) -> None:
    data_dir = fake_data_dir(tmp_path, "us", ("dev",))

    questions = load_questions("us", "dev", data_dir)

    assert [(q.qid, q.question) for q in questions] == [("us-dev-1", "dev question")]


def test_load_questions_checks_option_count(tmp_path: Path) -> None:
    data_dir = fake_data_dir(tmp_path, "us5", ("dev",))

    with pytest.raises(DataError, match=r"phrases_dev\.jsonl:1: expected 5 options"):
        load_questions("us5", "dev", data_dir)


def test_load_questions_reads_official_train_when_present(tmp_path: Path) -> None:
    data_dir = fake_data_dir(tmp_path, "mainland", ("train",))

    questions = load_questions("mainland", "train", data_dir)

    assert [(q.qid, q.question) for q in questions] == [("mainland-train-1", "train question")]


def test_missing_train_points_to_train_split_option(tmp_path: Path) -> None:
    data_dir = fake_data_dir(tmp_path, "us", ("dev", "test"))

    with pytest.raises(DataError) as info:
        load_questions("us", "train", data_dir)

    message = str(info.value)
    assert "phrases_no_exclude_train.jsonl" in message
    assert "--train-split dev:0.8" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "dataset, split, bad, names",
    [("usmle", "dev", "'usmle'", tuple(DATASETS)), ("us", "valid", "'valid'", SPLITS)],
)
def test_unknown_dataset_or_split_lists_names(tmp_path: Path, dataset, split, bad, names) -> None:
    with pytest.raises(OpenQAError) as info:  # an unknown dataset is a UsageError, an unknown split a DataError
        load_questions(dataset, split, tmp_path)

    message = str(info.value)
    assert bad in message
    assert all(name in message for name in names)


def test_missing_data_dir(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data folder not found"):
        load_questions("us", "dev", tmp_path / "absent")


def test_missing_dev_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"Taiwan/dev\.jsonl: file not found"):
        load_questions("tw", "dev", tmp_path)


# --- split_questions --------------------------------------------------------------------------


@pytest.mark.parametrize("n, n_train, n_select", [(1272, 1018, 254), (3425, 2740, 685), (1412, 1130, 282)])
def test_split_counts_match_train_md(n: int, n_train: int, n_select: int) -> None:
    questions = [make_question(i) for i in range(n)]

    train, select = split_questions(questions)

    assert (len(train), len(select)) == (n_train, n_select)
    train_ids = {q.qid for q in train}
    select_ids = {q.qid for q in select}
    assert not train_ids & select_ids
    assert train_ids | select_ids == {q.qid for q in questions}


def test_split_is_deterministic_and_seeded() -> None:
    questions = [make_question(i) for i in range(100)]

    first = split_questions(questions, 0.8, seed=13)
    again = split_questions(list(questions), 0.8, seed=13)
    other = split_questions(questions, 0.8, seed=14)

    assert first == again
    assert [q.qid for q in first[0]] != [q.qid for q in other[0]]
    assert [q.qid for q in first[0]] != [q.qid for q in questions[:80]]  # really shuffled
    assert [q.qid for q in questions] == [f"q-{i}" for i in range(100)]  # input untouched


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, 1.5])
def test_split_rejects_bad_fraction(fraction: float) -> None:
    with pytest.raises(DataError, match="between 0 and 1"):
        split_questions([make_question(i) for i in range(10)], fraction)


def test_split_rejects_empty_part() -> None:
    with pytest.raises(DataError, match="one part would be empty"):
        split_questions([make_question(0)], 0.8)


# --- parse_train_split ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected", [("dev:0.8", ("dev", 0.8)), (" dev : 0.5 ", ("dev", 0.5)), ("train:0.9", ("train", 0.9))]
)
def test_parse_train_split_valid(spec: str, expected: tuple[str, float]) -> None:
    assert parse_train_split(spec) == expected


@pytest.mark.parametrize(
    "spec, what",
    [
        ("dev", "SPLIT:FRACTION"),
        ("dev:abc", "SPLIT:FRACTION"),
        ("dev:", "SPLIT:FRACTION"),
        ("valid:0.8", "split must be one of"),
        ("test:0.8", "test is never used"),
        ("dev:0", "between 0 and 1"),
        ("dev:1", "between 0 and 1"),
        ("dev:1.2", "between 0 and 1"),
        ("dev:nan", "between 0 and 1"),
    ],
)
def test_parse_train_split_invalid(spec: str, what: str) -> None:
    with pytest.raises(DataError) as info:
        parse_train_split(spec)

    assert repr(spec) in str(info.value)
    assert what in str(info.value)


# --- the shared MedQA data --------------------------------------------------------------------

REAL_COUNTS = {
    "us": (1272, 1273),
    "us5": (1272, 1273),
    "mainland": (3425, 3426),
    "mainland5": (3425, 3426),
    "tw": (1412, 1413),
    "tw-en": (1412, 1413),
    "tw-zh": (1412, 1413),
}
WITH_PHRASES = {"us", "us5", "tw-en"}


@pytest.mark.parametrize("dataset", sorted(REAL_COUNTS))
@pytest.mark.parametrize("split", ["dev", "test"])
def test_real_split_loads(medqa_dir: Path, dataset: str, split: str) -> None:
    questions = load_questions(dataset, split, medqa_dir)

    spec = DATASETS[dataset]
    assert len(questions) == REAL_COUNTS[dataset][split == "test"]
    assert {len(q.options) for q in questions} == {spec.n_options}
    assert all(q.answer == q.options[q.answer_idx] for q in questions)
    assert questions[0].qid == f"{dataset}-{split}-1"
    assert len({q.qid for q in questions}) == len(questions)
    if dataset in WITH_PHRASES:
        assert all(q.metamap_phrases is not None for q in questions)
        assert sum(bool(q.metamap_phrases) for q in questions) > 0.99 * len(questions)
    else:
        assert all(q.metamap_phrases is None for q in questions)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_real_tw_en_is_the_translation_of_tw(medqa_dir: Path, split: str) -> None:
    tw = load_questions("tw", split, medqa_dir)
    tw_en = load_questions("tw-en", split, medqa_dir)
    plain_en = read_question_file(medqa_dir / "questions" / f"Taiwan/tw_translated_jsonl/en/{split}-2en.jsonl")

    assert [q.answer_idx for q in tw_en] == [q.answer_idx for q in tw]
    assert [(q.question, q.options, q.answer) for q in tw_en] == [
        (q.question, q.options, q.answer) for q in plain_en
    ]


@pytest.mark.parametrize("dataset, n_train, n_select", [("us", 1018, 254), ("mainland", 2740, 685), ("tw", 1130, 282)])
def test_real_dev_split_counts(medqa_dir: Path, dataset: str, n_train: int, n_select: int) -> None:
    split, fraction = parse_train_split("dev:0.8")
    train, select = split_questions(load_questions(dataset, split, medqa_dir), fraction)

    assert (len(train), len(select)) == (n_train, n_select)
    assert not {q.qid for q in train} & {q.qid for q in select}


def test_real_train_is_absent_and_says_so(medqa_dir: Path) -> None:
    if (medqa_dir / "questions" / DATASETS["us"].files["train"]).exists():
        pytest.skip("this data folder has the official US train file")

    with pytest.raises(DataError, match="--train-split"):
        load_questions("us", "train", medqa_dir)
