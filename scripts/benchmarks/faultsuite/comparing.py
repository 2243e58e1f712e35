"""Runs compared and parts read from files (command line): ``openqa compare`` over hostile runs (a
run named twice or through a link, records and prediction rows whose figures cannot be counted or
matched, runs of question files) and its ``--output`` (never one of the runs it compares, ``-`` is
standard output); and a named ensemble whose part is read from a predictions file
(``--predictions PART=FILE``) with scores that would silently drop a vote (NaN, Infinity, 1e308, a
400-digit integer, a question scored twice otherwise), rows of other questions, files that are no
files. Each refused in one line naming the file (and line), or answered."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from faultsuite.tally import OPENQA, Case, default_sigint, said


def _eval(loc: list[str], out: Path, *args: str) -> None:
    subprocess.run([OPENQA, "eval", "--dataset", "us", *loc, "--output", str(out), *args], check=True, capture_output=True,
                   preexec_fn=default_sigint)


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _variant(folder: Path, source: Path, name: str, record: Callable[[dict[str, Any]], Any] | None = None,
             rows: Callable[[list[Any]], Any] | None = None, raw: bytes | None = None) -> str:
    """A copy of the run ``source`` (its record and predictions) named ``name``, its record or rows
    changed in place by ``record`` / ``rows`` (or its predictions replaced by ``raw`` bytes)."""
    summary = json.loads(source.read_text())
    lines = [json.loads(line) for line in source.with_name(source.name.replace(".json", ".predictions.jsonl")).read_text().splitlines()]
    if record:
        summary = record(summary) or summary
    if rows:
        rows(lines)
    (folder / f"{name}.json").write_text(json.dumps(summary))
    predictions = raw if raw is not None else "".join(json.dumps(row) + "\n" for row in lines).encode()
    (folder / f"{name}.predictions.jsonl").write_bytes(predictions)
    return str(folder / f"{name}.json")


def compare_cases(loc: list[str], root: Path) -> list[Case]:
    """``openqa compare`` over two real runs of the synthetic test split and hostile copies of them."""
    runs = root / "cmp-runs"
    for method in ("ir-custom", "pmi"):
        _eval(loc, runs, "--split", "test", "--method", method)
    first, second = runs / "us-test-ir-custom.json", runs / "us-test-pmi.json"
    a, b = str(first), str(second)
    n = json.loads(first.read_text())["n"]  # the synthetic test split's questions
    compared = f"# us test: 2 runs on {n} common questions"
    (runs / "link.md").symlink_to(runs / "us-test-pmi.predictions.jsonl")
    (runs / "alias.json").symlink_to(second)
    (runs / "alias.predictions.jsonl").symlink_to(runs / "us-test-pmi.predictions.jsonl")
    kept = _digests(runs)
    untouched = lambda out, err: _digests(runs) == kept  # noqa: E731  (nothing of the runs replaced)
    hostile = root / "cmp-hostile"
    hostile.mkdir()
    dev = root / "cmp-dev"
    _eval(loc, dev, "--split", "dev", "--limit", "10")
    v = lambda name, **how: _variant(hostile, second, name, **how)  # noqa: E731
    written = root / "cmp-written" / "cmp.md"
    written.parent.mkdir()

    def written_as_printed(out: str, err: str) -> bool:
        return out.startswith(compared) and written.read_text() == out and json.loads(Path(f"{written}.json").read_text())["n"] == n

    lonely = str(hostile / "lonely.json")
    Path(lonely).write_text(second.read_text())
    question_files = [v(f"qfile-{k}", record=lambda r: {**r, "dataset": "mine", "split": "file"}) for k in (1, 2)]
    cases = [
        Case("--output one of the runs", "compare", ["compare", a, b, "--output", a],
             check=lambda out, err: "one of the runs compared: name another file" in err and untouched(out, err)),
        Case("--output a run's name without .json", "compare", ["compare", a, b, "--output", a.removesuffix(".json")],
             check=lambda out, err: "one of the runs compared" in err and untouched(out, err)),
        Case("--output a link to a run's predictions", "compare", ["compare", a, b, "--output", str(runs / "link.md")],
             check=lambda out, err: "one of the runs compared" in err and untouched(out, err)),
        Case("--output -", "compare", ["compare", a, b, "--output", "-"], expect="ok",
             check=lambda out, err: out.startswith(compared) and not (root / "-").exists() and untouched(out, err)),
        Case("--output a folder", "compare", ["compare", a, b, "--output", str(runs)], check=said("is a folder: name a file to write")),
        Case("--output a new file", "compare", ["compare", a, b, "--output", str(written)], expect="ok", check=written_as_printed),
        Case("--json", "compare", ["compare", a, b, "--json"], expect="ok", check=lambda out, err: json.loads(out)["n"] == n),
        Case("three runs, one given as its predictions", "compare", ["compare", a, b, v("third"), "--json"], expect="ok",
             check=lambda out, err: len(json.loads(out)["pairs"]) == 2),
        Case("the same run twice", "compare", ["compare", a, b, b], check=said("is given more than once: compare different runs")),
        Case("a run and its own predictions file", "compare", ["compare", a, b, str(runs / "us-test-pmi.predictions.jsonl")],
             check=said("is given more than once")),
        Case("a run and a link to it", "compare", ["compare", a, b, str(runs / "alias.json")], check=said("is given more than once")),
        Case("one run", "compare", ["compare", a], check=said("give at least two runs to compare")),
        Case("runs of different splits", "compare", ["compare", a, str(dev / "us-dev-ir-custom-limit10.json")],
             check=said("runs of different datasets cannot be compared")),
        Case("runs that share no question", "compare",
             ["compare", a, v("no-common", rows=lambda rows: [row.update(digest="x" + row["digest"]) for row in rows])],
             check=said("the runs share no question")),
        Case("two runs of question files", "compare", ["compare", *question_files, "--json"], expect="ok",
             check=lambda out, err: json.loads(out)["split"] == "file" and json.loads(out)["n"] == n),
        Case("a question file's run beside the dataset's", "compare", ["compare", a, question_files[0], "--json"], expect="ok",
             check=lambda out, err: json.loads(out)["common_questions"] == n),
        Case("a record that is a JSON list", "compare", ["compare", a, v("list", record=lambda r: [1, 2])],
             check=said("not an eval record openqa wrote (a JSON list, not an object)")),
        Case("a record that is missing", "compare", ["compare", a, str(hostile / "gone.predictions.jsonl")],
             check=said("not a readable eval record")),
        Case("a record without its predictions", "compare", ["compare", a, lonely], check=said("lonely.predictions.jsonl")),
        Case("a dataset that is no name", "compare", ["compare", a, v("dataset", record=lambda r: {**r, "dataset": {"us": 1}})],
             check=said("not an eval record openqa wrote (its dataset is not a name)")),
        Case("a digest that is no text", "compare", ["compare", a, v("digest", rows=lambda rows: rows[2].update(digest=[1]))],
             check=said('.predictions.jsonl:3: "digest" is [1], not text')),
        Case("a question predicted twice, otherwise", "compare",
             ["compare", a, v("twice", rows=lambda rows: rows.append({**rows[0], "prediction": None, "correct": False}))],
             check=said(f":{n + 1}: question digest")),
        Case("a question predicted twice, alike", "compare",
             ["compare", a, v("twice-alike", rows=lambda rows: rows.append(dict(rows[0]))), "--json"], expect="ok",
             check=lambda out, err: json.loads(out)["runs"][1]["questions_in_run"] == n),
        Case("a NaN probability", "compare", ["compare", a, v("nan", rows=lambda rows: rows[0]["probabilities"].update(A=float("nan")))],
             check=said(":1: the probability of A is nan, not a number from 0 to 1")),
        Case("a confidence of Infinity", "compare", ["compare", a, v("inf", rows=lambda rows: rows[4].update(confidence=float("inf")))],
             check=said(':5: "confidence" is inf')),
        Case('"correct" a 400-digit integer', "compare", ["compare", a, v("bigint", rows=lambda rows: rows[5].update(correct=10 ** 400))],
             check=said(':6: "correct" is 10000000000000000000... (401 characters), not true or false')),
        Case("a prediction that is no option", "compare",
             ["compare", a, v("letter", rows=lambda rows: rows[6].update(prediction="Z", answer="Z"))],
             check=said(":7: the prediction 'Z' is not one of the options")),
        Case("an empty predictions file", "compare", ["compare", a, v("empty", raw=b"")], check=said("no predictions")),
        Case("a predictions line that is no JSON", "compare", ["compare", a, v("nojson", raw=b'{"qid": "x", "correct": tru\n')],
             check=said(".predictions.jsonl:1:")),
        Case("a predictions file that is not UTF-8", "compare", ["compare", a, v("binary", raw=b"\xff\xfe{}\n")],
             check=said(".predictions.jsonl:1: not UTF-8")),
        Case("a row without a digest, no data folder", "compare",
             ["compare", a, v("nodigest", rows=lambda rows: rows[0].pop("digest"))], env={"OPENQA_DATA": str(root / "nowhere")},
             check=said("nowhere")),
    ]
    return cases


def predictions_cases(loc: list[str], root: Path) -> list[Case]:
    """A named ensemble fitted with a part read from a predictions file (the pmi run of the dev
    split standing in for an LLM's), evaluated on the test split with hostile part files."""
    settings = root / "tuned-with-ext"
    out = root / "out-ext"
    runs = root / "ext-runs"
    for split in ("dev", "test"):
        _eval(loc, runs, "--split", split, "--method", "pmi")
    named = ["--settings-dir", str(settings), "--ensemble", "with-ext"]
    subprocess.run([OPENQA, "tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,ext", *loc, *named,
                    "--predictions", f"ext={runs / 'us-dev-pmi.predictions.jsonl'}"], check=True, capture_output=True,
                   preexec_fn=default_sigint)
    good = (runs / "us-test-pmi.predictions.jsonl").read_text()
    lines = good.splitlines()
    parts = root / "ext-parts"
    parts.mkdir()

    def part(name: str, text: str | bytes) -> str:
        path = parts / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return str(path)

    def with_score(line: int, score: str) -> str:  # the score of A on ``line`` (1-based) replaced by ``score`` as JSON text
        row = lines[line - 1]
        start = row.index('"scores": {"A": ') + len('"scores": {"A": ')
        return "\n".join([*lines[:line - 1], row[:start] + score + row[row.index(",", start):], *lines[line:]]) + "\n"

    def rows(change: Callable[[list[dict[str, Any]]], Any]) -> str:
        parsed = [json.loads(line) for line in lines]
        change(parsed)
        return "".join(json.dumps(row) + "\n" for row in parsed)

    ev = ["eval", "--method", "ensemble", "--dataset", "us", "--split", "test", *loc, *named, "--output", str(out)]
    finite = "not a finite number of at most 1e+12 in size"
    text_score, binary, twice = with_score(2, '"high"'), b"\xff\xfe", good + with_score(1, "9.5").splitlines()[0] + "\n"
    half, alike = "\n".join(lines[:20]) + "\n", good + lines[0] + "\n"
    test_file = f"ext={runs / 'us-test-pmi.predictions.jsonl'}"
    cases = [
        Case("the named ensemble with its part file", "predictions files", [*ev, "--predictions", test_file, "--json"], expect="ok", check=lambda o, e: json.loads(o)["n"] == len(lines)),
        Case("the named ensemble without its part file", "predictions files", ev,
             check=said("the ensemble with-ext reads part 'ext' from a predictions file: give --predictions ext=FILE")),
        Case("a NaN score", "predictions files", [*ev, "--predictions", f"ext={part('nan.jsonl', with_score(3, 'NaN'))}"],
             check=said(f"nan.jsonl:3: the score of A is nan, {finite}")),
        Case("an Infinity score", "predictions files", [*ev, "--predictions", f"ext={part('inf.jsonl', with_score(4, '-Infinity'))}"],
             check=said(f"inf.jsonl:4: the score of A is -inf, {finite}")),
        Case("a score of 1e308", "predictions files", [*ev, "--predictions", f"ext={part('huge.jsonl', with_score(5, '1e308'))}"],
             check=said(f"huge.jsonl:5: the score of A is 1e+308, {finite}")),
        Case("a 400-digit score", "predictions files", [*ev, "--predictions", f"ext={part('digits.jsonl', with_score(6, '1' + '0' * 400))}"],
             check=said("digits.jsonl:6: the score of A is 10000000000000000000... (401 characters)")),
        Case("a score that is text", "predictions files", [*ev, "--predictions", f"ext={part('text.jsonl', text_score)}"],
             check=said("text.jsonl:2: the score of A is 'high', not a number or null")),
        Case("a question scored twice, otherwise", "predictions files",
             [*ev, "--predictions", f"ext={part('twice.jsonl', twice)}"],
             check=said(f"twice.jsonl:{len(lines) + 1}: question digest")),
        Case("a question scored twice, alike", "predictions files",
             [*ev, "--predictions", f"ext={part('alike.jsonl', alike)}", "--json"], expect="ok",
             check=lambda o, e: json.loads(o)["n"] == len(lines)),
        Case("an unknown scale", "predictions files",
             [*ev, "--predictions", f"ext={part('scale.jsonl', rows(lambda r: r[1].update(scale='bogus')))}"],
             check=said('scale.jsonl:2: "scale" must be one of')),
        Case("rows of other questions", "predictions files",
             [*ev, "--predictions", f"ext={part('other.jsonl', rows(lambda r: [x.update(digest='z' + x['digest']) for x in r]))}"],
             check=said("other.jsonl: no scores for question us-test-1")),
        Case("half the questions", "predictions files", [*ev, "--predictions", f"ext={part('half.jsonl', half)}"],
             check=said("half.jsonl: no scores for question us-test-21")),
        Case("option letters of another question", "predictions files",
             [*ev, "--predictions", f"ext={part('letters.jsonl', rows(lambda r: r[3].update(scores={'A': 0.1, 'Q': 0.3})))}"],
             check=said("letters.jsonl: question us-test-4 has options A, B, C, D, the file's row A, Q")),
        Case("a part file that is not UTF-8", "predictions files", [*ev, "--predictions", f"ext={part('binary.jsonl', binary)}"],
             check=said("binary.jsonl:1: not UTF-8 text")),
        Case("an empty part file", "predictions files", [*ev, "--predictions", f"ext={part('empty.jsonl', '')}"],
             check=said("empty.jsonl: no predictions")),
        Case("a part file that is missing", "predictions files", [*ev, "--predictions", f"ext={parts / 'gone.jsonl'}"],
             check=said("gone.jsonl: no file")),
        Case("a part file that is a folder", "predictions files", [*ev, "--predictions", f"ext={parts}"], check=said(f"no file {parts}")),
        Case("--predictions without PART=", "predictions files", [*ev, "--predictions", test_file.removeprefix("ext=")],
             check=said("--predictions must look like PART=FILE")),
        Case("--predictions naming a part twice", "predictions files",
             [*ev, *["--predictions", test_file] * 2], check=said("--predictions names a part twice")),
    ]
    for number, case in enumerate(cases):  # each into a folder of its own: a record read from another file is never replaced
        case.argv = [f"{out}-{number}" if value == str(out) else value for value in case.argv]
    return cases
