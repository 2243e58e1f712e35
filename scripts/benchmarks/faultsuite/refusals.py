"""Refusals (command line), each in one line naming what is wrong: a corpus without indexable
words, a settings folder that is missing or a file, repeated keys, a file at an index's name, an
eleventh option, option letters past J, impossible ensemble parts and a settings record whose
calibration no longer matches it, and the messages that once blamed the wrong thing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable

from faultsuite.tally import OPENQA, Case, default_sigint, said

from openqa import load_questions


def smaller_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path, data: Path) -> list[Case]:
    """The smaller defects of the round, each refused in one line (or answered as asked)."""
    stop_words = qfile("stop-words.jsonl", b'{"id": "p1", "title": "t", "text": "the of and a"}\n{"id": "p2", "title": "t", "text": "it is"}\n')
    blocked = root / "ix-blocked"
    blocked.mkdir()
    (blocked / "en-custom").write_text("my notes")
    ev = ["eval", "--dataset", "us", "--split", "dev", "--limit", "5", *loc, "--output", str(root / "out-s")]
    repeated = b'{"question": "Why?", "options": {"A": "aspirin", "A": "lithium", "B": "heparin"}, "answer_idx": "A"}\n'
    mirage = b'{"medqa": {"7": {"question": "Why?", "options": {"A": "x", "B": "y"}, "answer": "A"}, "7": {"question": "Why not?", "options": {"A": "x", "B": "y"}, "answer": "B"}}}'
    eleven = ("What?\n" + "".join(f"{chr(ord('A') + i)}: option {i}\n" for i in range(11))).encode()
    kept = lambda out, err: (blocked / "en-custom").read_text() == "my notes" and [p.name for p in blocked.iterdir()] == ["en-custom"]  # noqa: E731
    return [
        Case("corpus without indexable words (custom)", "smaller",
             ["index", "--lang", "en", "--corpus", stop_words, "--index-dir", str(root / "ix-stop")],
             check=lambda out, err: "no indexable words" in err),
        Case("corpus without indexable words (pmi)", "smaller",
             ["index", "--lang", "en", "--engine", "pmi", "--corpus", stop_words, "--index-dir", str(root / "ix-stop")],
             check=lambda out, err: "no indexable words" in err and not (root / "ix-stop" / "stop-words-en-pmi").exists()),
        Case("--settings-dir missing", "smaller", [*ev, "--settings-dir", str(root / "no-such-tuned")], check=lambda out, err: "not found" in err),
        Case("--settings-dir a file", "smaller", [*ev, "--settings-dir", qfile("tuned-file", b"x")], check=lambda out, err: "is not a folder" in err),
        Case("OPENQA_SETTINGS missing", "smaller", ev, env={"OPENQA_SETTINGS": str(root / "no-such-env-tuned")},
             check=lambda out, err: "settings folder" in err),
        Case("eval --retrieval --json", "smaller", [*ev, "--retrieval", "--retrievers", "ir-custom", "--json"], expect="ok",
             check=lambda out, err: "ir-custom" in json.loads(out)["retrievers"]),
        Case("repeated option key", "smaller", ["eval", "--questions", qfile("repeated.jsonl", repeated), *loc],
             check=lambda out, err: "key 'A' repeated" in err),
        Case("repeated MIRAGE id", "smaller", ["eval", "--questions", qfile("repeated-ids.json", mirage), *loc],
             check=lambda out, err: "key '7' repeated" in err),
        Case("a file at the index's name", "smaller", ["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(blocked)],
             check=kept),
        Case("eleven pasted options", "smaller", ["answer", *loc], eleven, check=lambda out, err: "at most 10 options" in err),
        Case("eleven option flags", "smaller", ["answer", "--question", "What?", *[f"--option={chr(ord('A') + i)}=x{i}" for i in range(11)], *loc],
             check=lambda out, err: "at most 10 options" in err),
    ]


def ensemble_cases(loc: list[str], root: Path) -> list[Case]:
    """``tune --method ensemble`` with parts that name nothing, a setting a part does not have, or
    one part twice: refused in one line with nothing written; and a settings record edited after its
    calibration was fitted (what an interrupted or failed tune used to leave) is refused by eval."""
    settings = root / "tuned-parts"
    tune = ["tune", "--method", "ensemble", "--dataset", "us", *loc, "--settings-dir", str(settings)]

    def nothing_written(text: str) -> Callable[[str, str], bool]:
        return lambda out, err: text in err and not any(settings.glob("*"))

    paired = root / "tuned-pair"

    def unpair() -> None:
        subprocess.run([OPENQA, "tune", "--method", "ir-custom", "--dataset", "us", "--limit", "40", *loc, "--settings-dir", str(paired)],
                       check=True, capture_output=True, preexec_fn=default_sigint)
        record = json.loads((paired / "ir-custom-us.json").read_text())
        record["chosen"]["top_n"] = 3
        (paired / "ir-custom-us.json").write_text(json.dumps(record))

    return [
        Case("--parts \"\"", "ensemble parts", [*tune, "--parts", ""], check=nothing_written("--parts names no method")),
        Case("--parts ,", "ensemble parts", [*tune, "--parts", ","], check=nothing_written("--parts names no method")),
        Case("--parts pmi:top_n=3", "ensemble parts", [*tune, "--parts", "ir-custom,pmi:top_n=3"],
             check=nothing_written("pmi has no setting top_n")),
        Case("--parts ir-custom,ir-custom", "ensemble parts", [*tune, "--parts", "ir-custom,ir-custom"], check=nothing_written("ensemble part 'ir-custom' is named twice")),
        Case("settings edited after their calibration", "tuned pairs",
             ["eval", "--dataset", "us", "--split", "dev", *loc, "--settings-dir", str(paired), "--output", str(root / "out-pair")],
             check=said("ir-custom-us.calibration.json was fitted with other settings than ir-custom-us.json"), setup=unpair),
    ]


def option_cases(loc: list[str]) -> list[Case]:
    """Option letters: letters past J are refused (``Y``, ``Z`` used to answer ``Y``); a run that
    does not start at A is answered with its own letters."""
    question = ["answer", "--question", "Which drug inhibits the enzyme?", *loc]
    return [
        Case("--option Y and Z", "option letters", [*question, "--option", "Y=aspirin", "--option", "Z=heparin"],
             check=said("option letters are A to J, not 'Y'")),
        Case("--option B and C", "option letters", [*question, "--option", "B=aspirin", "--option", "C=heparin", "--json"], expect="ok",
             check=lambda out, err: json.loads(out)["prediction"] in ("B", "C")),
    ]


def message_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """Messages that blamed the wrong thing: a tuned ``top_n`` of -1 (not the ``--top-n`` flag), a
    CSV quote never closed (not "found 1 column"), a damaged reply cache (not "give a writable
    --cache-dir"), a corpus JSON error (one "at", with its column), and a negative ``--offset``."""
    tuned = root / "tuned-negative"
    tuned.mkdir()
    (tuned / "ir-custom-us.json").write_text(json.dumps({"chosen": {"top_n": -1}}))
    csv = qfile("mmlu.csv", b'What is it?,a,b,c,d,A\n"Which drug,a,b,c,d,B\nLast,a,b,c,d,C\n')
    cache = root / "cache-damaged"
    cache.mkdir()
    (cache / "replies.sqlite").write_bytes(b"not a database at all" * 100)
    corpus = qfile("bad-corpus.jsonl", b'{"id": "a", "title": "T", "text": "enzyme"}\n{"id": "b" "text": "y"}\n')
    return [
        Case("a tuned top_n of -1", "messages", ["eval", "--dataset", "us", "--settings-dir", str(tuned), *loc],
             check=lambda out, err: "ir-custom-us.json: unreadable tuning record" in err and "--top-n" not in err),
        Case("a CSV quote never closed", "messages", ["eval", "--questions", csv, *loc], check=said("mmlu.csv:2: a quoted field is not closed")),
        Case("a damaged reply cache", "messages",
             ["answer", "--method", "llm", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--cache-dir", str(cache),
              "--question", "Why?", "--option", "A=x", "--option", "B=y", *loc],
             check=lambda out, err: "replies.sqlite is not a reply cache" in err and "writable" not in err),
        Case("a corpus line that is not JSON", "messages", ["index", "--lang", "en", "--corpus", corpus, "--index-dir", str(root / "ix-bad")],
             check=lambda out, err: "bad-corpus.jsonl:2: not valid JSON" in err and "at column" in err and " at at " not in err),
        Case("--offset -1", "messages", ["eval", "--dataset", "us", "--offset", "-1", *loc], check=said("--offset must be 0 or more")),
    ]


def bank_cases(qfile: Callable[[str, bytes], str], loc: list[str]) -> list[Case]:
    """``--bank`` files that cannot be solved questions (missing, no answers, an answer that is not
    an option, broken JSON, the other language, however large the exam's own bank beside them) and
    ``--demonstrations`` where no LLM would see them: each refused in one line."""
    bank = ["eval", "--dataset", "us", "--split", "dev", "--limit", "3", "--method", "bank", *loc]
    options = b'"options": {"A": "aspirin", "B": "heparin"}'
    return [
        Case("--bank missing file", "bank", [*bank, "--bank", "no-such-bank.jsonl"], check=said("--bank no-such-bank.jsonl: no such file")),
        Case("--bank without answers", "bank", [*bank, "--bank", qfile("bank-noanswer.jsonl", b'{"question": "Why?", ' + options + b"}\n")],
             check=said("is not one of the option letters")),
        Case("--bank answer not an option", "bank",
             [*bank, "--bank", qfile("bank-badanswer.jsonl", b'{"question": "Why?", ' + options + b', "answer_idx": "C"}\n')],
             check=said("'C' is not one of the option letters A, B")),
        Case("--bank broken JSON", "bank", [*bank, "--bank", qfile("bank-broken.jsonl", b'{"question": "Why?", "options": {"A": "x"\n')],
             check=said("not valid JSON")),
        Case("--bank of the other language", "bank",
             [*bank, "--bank", qfile("bank-zh.jsonl", '{"question": "患者胸痛", "options": {"A": "阿司匹林", "B": "肝素"}, "answer_idx": "A"}\n'.encode())],
             check=said("is not in the language asked for (en)")),
        Case("--demonstrations without an LLM", "bank", ["eval", "--dataset", "us", "--split", "dev", "--limit", "3", "--demonstrations", "2", *loc],
             check=said("--demonstrations shows solved questions to an LLM")),
        Case("--demonstrations -1", "bank",
             ["eval", "--dataset", "us", "--method", "llm", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--demonstrations", "-1", *loc],
             check=said("--demonstrations must be at least 0, not -1")),
    ]


def offset_cases(loc: list[str], root: Path) -> list[Case]:
    """``eval --offset`` at or past the end (it used to report "0.00% (0/0)" and write a record), a
    slice running off the end, ``--limit`` beyond the split (the full run, named as one), a
    question file's offset, and offsets that are no count: refused in one line or answered as asked."""
    out = root / "out-offsets"
    n = len(load_questions("us", "test", loc[loc.index("--data-dir") + 1]))
    ev = ["eval", "--dataset", "us", "--split", "test", *loc, "--output", str(out), "--json"]
    n_is = lambda count: lambda o, e: json.loads(o)["n"] == count  # noqa: E731
    nothing = lambda text: lambda o, e: text in e and not list(out.glob(f"*from{n}*")) and not list(out.glob(f"*from{n + 1}*"))  # noqa: E731
    return [
        Case("--offset at the end", "offsets", [*ev, "--offset", str(n)],
             check=nothing(f"--offset {n} is at or past the end: us test has {n} questions")),
        Case("--offset past the end", "offsets", [*ev, "--offset", str(n + 1), "--limit", "5"],
             check=nothing(f"--offset {n + 1} is at or past the end")),
        Case("--offset of 24 digits", "offsets", [*ev, "--offset", "1" + "0" * 23], check=said("is at or past the end")),
        Case("--offset with --retrieval at the end", "offsets", [*ev, "--offset", str(n), "--retrieval", "--retrievers", "ir-custom"],
             check=said(f"--offset {n} is at or past the end")),
        Case("--offset abc", "offsets", [*ev, "--offset", "abc"], check=said("argument --offset: invalid int value: 'abc'")),
        Case("--offset 2.5", "offsets", [*ev, "--offset", "2.5"], check=said("argument --offset: invalid int value: '2.5'")),
        Case("a slice running off the end", "offsets", [*ev, "--offset", str(n - 2), "--limit", "5"], expect="ok",
             check=lambda o, e: n_is(2)(o, e) and (out / f"us-test-ir-custom-from{n - 2}.json").is_file()),
        Case("--limit beyond the split", "offsets", [*ev, "--limit", "99999"], expect="ok",
             check=lambda o, e: n_is(n)(o, e) and not list(out.glob("*limit99999*"))),
        Case("--offset 0 and --limit reaching the end", "offsets", [*ev, "--offset", "0", "--limit", str(n)], expect="ok", check=n_is(n)),
    ]


def ensemble_name_cases(loc: list[str], root: Path) -> list[Case]:
    """``--ensemble NAME`` checked as corpus names are, before any work, with nothing written ("..",
    "/" and a long name used to write outside the settings folder, make folders or fail after the
    work), and a name never fitted."""
    settings, fitted = root / "tuned-names", root / "tuned-none"
    fitted.mkdir()
    tune = ["tune", "--method", "ensemble", "--dataset", "us", *loc, "--settings-dir", str(settings), "--limit", "10"]
    usable = "is not usable: give --ensemble with letters, digits"

    def refused(out: str, err: str) -> bool:
        return usable in err and not settings.exists() and not (root / "ensemble-x-us.json").exists()

    names = [("..", ".."), ("a slash", "../x"), ("300 characters", "n" * 300), ("empty", ""), ("a space", "a b"),
             ("a leading dot", ".hidden"), ("an escape sequence", "ens\x1b[31m")]
    return [
        *[Case(f"--ensemble {what}", "ensemble names", [*tune, f"--ensemble={name}"], check=refused) for what, name in names],
        Case("--ensemble of a method that is no ensemble", "ensemble names",
             ["eval", "--dataset", "us", *loc, "--ensemble", "x", "--output", str(root / "out-names")],
             check=said("--predictions and --ensemble apply to --method ensemble, not ir-custom")),
        Case("--ensemble never fitted", "ensemble names",
             ["eval", "--method", "ensemble", "--dataset", "us", *loc, "--settings-dir", str(fitted),
              "--ensemble", "never", "--output", str(root / "out-names")],
             check=said("no ensemble 'never' is fitted for us: run openqa tune --method ensemble --dataset us --ensemble never")),
    ]


def credential_cases(loc: list[str], root: Path) -> list[Case]:
    """An ``--endpoint`` with a user or password (``http://user:pass@host/v1``): refused in one line
    by every command that takes one, before anything is written or served, naming ``$OPENQA_API_KEY``
    and never the password; the address without them is shown."""
    out = root / "out-credentials"
    secret = "s3cret-word"
    named = "must not carry a user or password: give the key in $OPENQA_API_KEY"

    def refused(out_: str, err: str) -> bool:
        return named in err and secret not in out_ + err and not out.exists()

    llm = ["--method", "llm", "--model", "m", *loc]
    question = ["--question", "Which drug?", "--option", "A=aspirin", "--option", "B=heparin"]
    urls = {"user and password": f"http://someone:{secret}@127.0.0.1:9/v1", "a password alone": f"http://:{secret}@127.0.0.1:9/v1",
            "a user alone": f"http://{secret}@127.0.0.1:9/v1", "an upper-case scheme": f"HTTPS://u:{secret}@host.invalid/v1"}
    cases = [Case(f"answer --endpoint with {what}", "credentials", ["answer", *llm, "--endpoint", url, *question], check=refused)
             for what, url in urls.items()]
    url = urls["user and password"]
    return [
        *cases,
        Case("eval --endpoint with a password", "credentials",
             ["eval", "--dataset", "us", *llm, "--endpoint", url, "--output", str(out)], check=refused),
        Case("tune --endpoint with a password", "credentials",
             ["tune", "--method", "ensemble", "--parts", "ir-custom,llm", "--dataset", "us", "--model", "m", *loc, "--endpoint", url,
              "--settings-dir", str(out)], check=refused),
        Case("serve --endpoint with a password", "credentials", ["serve", *llm, "--endpoint", url, "--port", "9"],
             check=lambda o, e: refused(o, e) and "page at" not in o + e),
    ]
