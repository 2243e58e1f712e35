"""Hostile input on the command line: questions mangled the way PDFs and web pages mangle them
read as their plain form, question files read once (pipes, FIFOs), corpus text escaped on the
terminal, lone surrogates, a deeply nested manifest, a memory limit, and the smaller refusals
(repeated keys, a file at an index's name, an eleventh option, impossible ensemble parts, messages
that name what is wrong)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from openqa.data import read_question_file
from openqa.data.pasted import make_question, parse_block
from openqa.text.unicode import normalize, printable
from tests.helpers import OPENQA, QUESTIONS, loc, make_data_dir, one_line_error, run

PLAIN = QUESTIONS[0]
FULL_WIDTH = {ord(c): ord(c) + 0xFEE0 for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"}


def mangled(text: str) -> str:
    """``text`` as a PDF or web page may give it: full-width letters, a zero-width space and a soft
    hyphen inside words, an "fi" ligature, and a right-to-left override."""
    words = text.split(" ")
    words[0] = words[0].translate(FULL_WIDTH)
    words = [w[:3] + "\u200b" + w[3:] if len(w) > 6 else w for w in words]
    return "\u202e" + " ".join(words).replace("fi", "\ufb01").replace("ation", "a\u00adtion")


def test_a_mangled_question_reads_as_its_plain_form_from_flags_pastes_and_files(tmp_path):
    options = {k: mangled(v) for k, v in PLAIN["options"].items()}
    assert mangled(PLAIN["question"]) != PLAIN["question"]
    flags = make_question(mangled(PLAIN["question"]), options)
    pasted = parse_block(mangled(PLAIN["question"]) + "\n" + "\n".join(f"{k.translate(FULL_WIDTH)}：{v}" for k, v in options.items()))
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({**PLAIN, "question": mangled(PLAIN["question"]), "options": options,
                                "answer": options[PLAIN["answer_idx"]]}) + "\n")
    (from_file,) = read_question_file(path)
    for question in (flags, pasted, from_file):
        assert question.question == PLAIN["question"] and question.options == PLAIN["options"]
    assert normalize(normalize(mangled("x ﬁ y"))) == normalize(mangled("x ﬁ y"))


@pytest.mark.spawns
def test_a_mangled_question_predicts_what_its_plain_form_does(indexed):
    def answer(question: dict) -> dict:
        options = [f"--option={k}={v}" for k, v in question["options"].items()]
        result = run("answer", "--question", question["question"], *options, "--json", *indexed)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    plain = answer(PLAIN)
    odd = answer({"question": mangled(PLAIN["question"]), "options": {k: mangled(v) for k, v in PLAIN["options"].items()}})
    assert odd["prediction"] == plain["prediction"] and any(o["score"] for o in plain["options"])
    assert [o["score"] for o in odd["options"]] == [o["score"] for o in plain["options"]]


@pytest.mark.spawns
def test_a_question_file_piped_to_dev_stdin_loses_no_question(indexed, tmp_path):
    """The file is read from one handle: a pipe cannot be read twice (the first question was lost)."""
    lines = "".join(json.dumps(q) + "\n" for q in QUESTIONS)
    result = subprocess.run([OPENQA, "eval", "--questions", "/dev/stdin", "--json", "--output", str(tmp_path), *indexed],
                            input=lines, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n"] == len(QUESTIONS)


@pytest.mark.spawns
def test_a_fifo_with_a_writer_is_read_and_one_without_is_a_one_line_error(indexed, tmp_path):
    fifo = tmp_path / "q.fifo"
    os.mkfifo(fifo)
    lonely = run("eval", "--questions", str(fifo), *indexed)  # nobody writes: no wait for a writer
    assert f"{fifo}: no questions" in one_line_error(lonely)
    child = subprocess.Popen([OPENQA, "eval", "--questions", str(fifo), "--json", "--output", str(tmp_path), *indexed],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(fifo, "w") as writer:  # waits for the reader, as a writer does
        writer.write("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert json.loads(out)["n"] == len(QUESTIONS)


def test_printable_shows_control_characters_one_for_one():
    text = "a\x1b]0;owned\x07b\nc\u202ed\x9b"
    shown = printable(text)
    assert len(shown) == len(text) and shown == "a\u241b]0;owned\u2407b\u240ac\ufffdd\ufffd"
    assert printable("plain, 中文 ＡＢ") == "plain, 中文 ＡＢ"


@pytest.mark.spawns
def test_escape_sequences_in_a_corpus_reach_the_terminal_as_symbols(tmp_path):
    """A JSONL corpus is taken as it is: its titles and text may hold escape sequences (set the
    window title, clear the screen) and newlines (ids may not: a TREC run could not carry them);
    ``openqa answer`` shows them, never sends them."""
    corpus = tmp_path / "evil.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in [
        {"id": "p1", "title": "Book\x1b]0;owned\x07\n[fake 0.99]", "text": "Ceftriaxone \x1b[2J blocks cell wall synthesis."},
        {"id": "p2", "title": "Other", "text": "Gentamicin binds the 30S ribosome\x1b[31m."},
    ]))
    ix = ["--index-dir", str(tmp_path / "ix")]
    assert run("index", "--lang", "en", "--corpus", str(corpus), *ix).returncode == 0
    result = run("answer", "--corpus", "evil", "--question", "Which drug blocks cell wall synthesis?", "--option",
                 "A=Ceftriaxone", "--option", "B=Gentamicin", "--top-n", "1", *ix)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "\u241b]0;owned\u2407" in result.stdout
    evidence = [line for line in result.stdout.splitlines() if line.startswith("      [")]
    assert evidence and all("fake" not in line or "\u240a" in line for line in evidence)
    assert not any(line.startswith("[fake") for line in result.stdout.splitlines())


@pytest.mark.spawns
def test_a_deeply_nested_manifest_is_a_one_line_error(indexed, tmp_path):
    data, indexes = Path(indexed[1]), tmp_path / "indexes"
    index = indexes / "en-custom"
    index.mkdir(parents=True)
    (index / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    err = one_line_error(run("eval", "--dataset", "us", "--data-dir", str(data), "--index-dir", str(indexes)))
    assert "manifest.json is not valid JSON (nested too deeply)" in err


@pytest.mark.spawns
def test_eval_under_a_400_mb_address_space_limit_stops_in_one_line(indexed, tmp_path):
    """OpenBLAS used to spin forever there, deaf to SIGTERM (and a C++ abort at 550 MB): a limit
    under openqa.limits.MIN_ADDRESS_SPACE_MB is refused in one line before any library loads."""
    for kb in (400_000, 550_000):
        limited = f'ulimit -v {kb}; exec "$0" "$@"'
        result = subprocess.run(["bash", "-c", limited, OPENQA, "eval", "--dataset", "us", "--output", str(tmp_path), *indexed],
                                capture_output=True, text=True, timeout=300)
        assert "below the 640 MiB openqa needs" in one_line_error(result) and "out of memory" in result.stderr


@pytest.mark.spawns
def test_openblas_gets_one_thread_only_under_a_memory_limit():
    code = "import os, openqa; print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (64 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))

    limited = subprocess.run([sys.executable, "-c", code], env=env, preexec_fn=limit, capture_output=True, text=True)
    free = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert limited.stdout.strip() == "1"
    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        assert free.stdout.strip() == "None"


@pytest.mark.spawns
def test_a_corpus_without_indexable_words_is_refused_at_build(tmp_path):
    corpus = tmp_path / "stop.jsonl"
    corpus.write_text('{"id": "p1", "title": "t", "text": "the of and a"}\n')
    for engine in ("custom", "pmi"):
        result = run("index", "--lang", "en", "--engine", engine, "--corpus", str(corpus), "--index-dir", str(tmp_path / "ix"))
        assert result.returncode == 2 and "Traceback" not in result.stderr and "Warning" not in result.stderr
        assert "no indexable words" in result.stderr.strip().splitlines()[-1]  # after the progress bar
    assert not (tmp_path / "ix").exists() or not any((tmp_path / "ix").iterdir())


@pytest.mark.spawns
def test_eval_retrieval_json_prints_json(indexed, tmp_path):
    result = run("eval", "--dataset", "us", "--retrieval", "--retrievers", "ir-custom", "--json",
                 "--output", str(tmp_path), *indexed)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert set(record["retrievers"]) == {"ir-custom"} and Path(record["files"]["summary"]).is_file()


@pytest.mark.spawns
def test_repeated_option_keys_and_mirage_ids_are_refused(indexed, tmp_path):
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"question": "Why?", "options": {"A": "x", "A": "z", "B": "y"}, "answer_idx": "A"}\n')
    assert f"{jsonl}:1: not valid JSON (key 'A' repeated in one object)" in one_line_error(run("eval", "--questions", str(jsonl), *indexed))
    mirage = tmp_path / "benchmark.json"
    record = '{"question": "Why?", "options": {"A": "x", "B": "y"}, "answer": "A"}'
    mirage.write_text('{"medqa": {"0001": %s, "0001": %s}}\n' % (record, record))
    assert "key '0001' repeated" in one_line_error(run("eval", "--questions", str(mirage), *indexed))


@pytest.mark.spawns
def test_a_file_at_an_index_name_is_refused_and_kept(tmp_path):
    data = make_data_dir(tmp_path)
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / "en-custom").write_text("mine")
    err = one_line_error(run("index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(tmp_path / "ix")))
    assert "is a file, not an index folder" in err
    assert sorted(p.name for p in (tmp_path / "ix").iterdir()) == ["en-custom"]
    assert (tmp_path / "ix" / "en-custom").read_text() == "mine"


@pytest.mark.spawns
def test_an_eleventh_pasted_option_is_refused_as_one(indexed):
    lines = ["What?"] + [f"{chr(ord('A') + i)}: option {i}" for i in range(11)]
    assert "at most 10 options (A-J), not 11" in one_line_error(run("answer", *indexed, stdin="\n".join(lines) + "\n"))


@pytest.mark.spawns
def test_a_corpus_text_with_a_lone_surrogate_is_a_file_line_error(tmp_path):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "a", "title": "T", "text": "cell wall"}\n{"id": "b", "title": "T", "text": "x\\ud800y"}\n')
    done = run("index", "--lang", "en", "--corpus", str(corpus), "--index-dir", str(tmp_path / "ix"))
    assert done.returncode == 2 and "passages.jsonl:2: not valid JSON (a lone surrogate escape" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "ix" / "en-custom-passages").exists()


@pytest.mark.spawns
@pytest.mark.parametrize("parts, message", [
    ("", "--parts names no method"), (",", "--parts names no method"),
    ("ir-custom,pmi:top_n=3", "ensemble part 'pmi:top_n=3': pmi has no setting top_n"),
    ("ir-custom,pmi,ir-custom", "ensemble part 'ir-custom' is named twice in --parts"),  # once failed after the fit, blaming the record
])
def test_impossible_ensemble_parts_are_refused(built, parts, message, tmp_path):
    settings = tmp_path / "tuned-parts"
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", parts, *loc(built), "--settings-dir", str(settings))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    # refused before any work: the pair's lock file (taken before the fit) used to be left in the settings folder
    assert not settings.exists() or not list(settings.iterdir())


@pytest.mark.spawns
def test_smaller_refusals_name_what_is_wrong(built, tmp_path):
    root, data, indexes = built
    passwd = tmp_path / "passwd"
    passwd.write_text("not a folder\n")
    done = run("search", "aspirin", "--data-dir", str(data), "--index-dir", str(passwd))
    assert done.returncode == 2 and f"the index folder {passwd} (--index-dir) is a file, not a folder" in done.stderr
    links = tmp_path / "ix"
    links.mkdir()
    (links / "en-custom").symlink_to(tmp_path / "gone")
    done = run("index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(links))
    assert done.returncode == 2 and "is a symbolic link to" in done.stderr and "which does not exist" in done.stderr
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"id": "a", "title": "T", "text": "x"}\n{"id": "a", "title": "T", "text": "y"}\n')
    done = run("corpus", "stats", "--lang", "en", "--corpus", str(twice))
    assert done.returncode == 2 and "twice.jsonl:2: id 'a' was already used on an earlier line" in done.stderr
    csv = tmp_path / "mmlu.csv"
    csv.write_text('What is it?,a,b,c,d,A\n"Which drug,a,b,c,d,B\nLast,a,b,c,d,C\n')
    done = run("eval", "--questions", str(csv), *loc(built))
    assert done.returncode == 2 and "mmlu.csv:2: a quoted field is not closed" in done.stderr
    settings = tmp_path / "tuned"
    settings.mkdir()
    (settings / "ir-custom-us.json").write_text(json.dumps({"chosen": {"top_n": -1}}))
    done = run("eval", "--dataset", "us", "--settings-dir", str(settings), *loc(built))
    assert done.returncode == 2 and "ir-custom-us.json: unreadable tuning record" in done.stderr and "--top-n" not in done.stderr
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "replies.sqlite").write_bytes(b"not a database at all" * 100)
    from openqa.errors import OpenQAError
    from openqa.llm.cache import ReplyCache

    with pytest.raises(OpenQAError, match="replies.sqlite is not a reply cache"):
        ReplyCache(cache)


@pytest.mark.spawns
def test_an_offset_past_the_end_is_refused_and_a_limit_past_it_is_the_full_run(indexed, tmp_path):
    out = tmp_path / "results"
    for offset in ("2", "7"):  # the tiny US dev split has 2 questions
        err = one_line_error(run("eval", "--dataset", "us", "--split", "dev", "--offset", offset, "--output", str(out), *indexed))
        assert f"--offset {offset} is at or past the end: us dev has 2 questions" in err
    assert not out.exists()  # refused before any work: no record
    for extra, stem in ((), "us-dev-ir-custom"), (("--offset", "1"), "us-dev-ir-custom-from1"):
        done = run("eval", "--dataset", "us", "--split", "dev", "--limit", "99999", *extra, "--output", str(out), *indexed)
        assert done.returncode == 0, done.stderr
        record = json.loads((out / f"{stem}.json").read_text())
        assert record["limit"] is None and record["n"] == 2 - len(extra) // 2
    assert sorted(p.name for p in out.glob("*.json")) == ["us-dev-ir-custom-from1.json", "us-dev-ir-custom.json"]


@pytest.mark.spawns
def test_an_ensemble_name_is_checked_as_a_corpus_name_before_any_work(built, tmp_path):
    settings = tmp_path / "nest" / "tuned"
    settings.mkdir(parents=True)
    for name in ("../escape", "a/b", "e" * 300, ""):
        for command in (("tune", "--parts", "ir-custom,pmi", "--settings-dir", str(settings)), ("eval", "--output", str(tmp_path / "out"))):
            done = run(*command, "--method", "ensemble", "--ensemble", name, "--dataset", "us", *loc(built))
            assert f"ensemble name {name!r} is not usable: give --ensemble with letters" in one_line_error(done), command
    assert sorted(p.name for p in (tmp_path / "nest").iterdir()) == ["tuned"] and not any(settings.iterdir())
    assert not (tmp_path / "out").exists()
