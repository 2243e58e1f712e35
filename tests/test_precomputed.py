"""Ensemble parts read from predictions files: fitted and evaluated without running the part, matched
to questions by content (shuffled rows, other ids), the same figures as running it; a question the
file lacks, a bad row, a label among no parts are one-line errors; a file written under a scale's
former name (``log-probability`` for probabilities) reads as it always did."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from openqa.data import Question
from openqa.errors import DataError
from openqa.evaluate.calibration import uncalibrated
from openqa.scorers.base import OptionScores
from openqa.scorers.ensemble import letter_prior
from openqa.scorers.precomputed import PrecomputedScorer
from tests.helpers import run, site_env


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("precomputed")
    env = site_env(root)
    for split in ("dev", "test"):  # PMI's predictions of both splits, to be read back as a part
        done = run("eval", "--dataset", "us", "--split", split, "--method", "pmi", env=env)
        assert done.returncode == 0, done.stderr
    return root, env


def shuffled_copy(source, target, seed=0):
    """The rows of ``source`` in another order, with their ids changed (matching is by content)."""
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    random.Random(seed).shuffle(rows)
    target.write_text("".join(json.dumps({**r, "qid": f"other-{i}"}) + "\n" for i, r in enumerate(rows)))
    return target


@pytest.mark.spawns
def test_a_part_read_from_predictions_gives_the_figures_of_running_it(site):
    root, env = site
    dev = shuffled_copy(root / "results" / "us-dev-pmi.predictions.jsonl", root / "pmi-dev.jsonl")
    test = shuffled_copy(root / "results" / "us-test-pmi.predictions.jsonl", root / "pmi-test.jsonl", seed=1)
    live = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,pmi", "--ensemble", "live", env=env)
    assert live.returncode == 0, live.stderr
    read = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,pmi", "--ensemble", "read",
               "--predictions", f"pmi={dev}", env=env)
    assert read.returncode == 0, read.stderr
    fits = {name: json.loads((root / "tuned" / f"ensemble-{name}-us.json").read_text())["chosen"] for name in ("live", "read")}
    assert fits["live"]["parts"] == fits["read"]["parts"] == ["ir-custom", "pmi"]
    assert fits["live"]["weights"] == pytest.approx(fits["read"]["weights"], abs=1e-3)  # scores kept to 4 decimals
    out = {}
    for name, extra in (("live", []), ("read", ["--predictions", f"pmi={test}"])):
        done = run("eval", "--method", "ensemble", "--dataset", "us", "--ensemble", name, *extra, "--json", env=env)
        assert done.returncode == 0, done.stderr
        out[name] = json.loads(done.stdout)
    assert out["live"]["accuracy"] == out["read"]["accuracy"] and out["read"]["variant"] == "read"
    assert out["read"]["versus_baseline"]["method"].startswith("ensemble (the exam's own")  # a named ensemble against the exam's
    rows = (root / "results" / "us-test-ensemble-read.predictions.jsonl").read_text().splitlines()
    assert all(json.loads(r)["digest"] and json.loads(r)["scale"] == "logits" for r in rows)


@pytest.mark.spawns
@pytest.mark.parametrize("label", ["ext", "llm"])
def test_a_named_ensemble_run_without_its_part_file_names_the_file(site, label):
    root, env = site
    dev = root / "results" / "us-dev-pmi.predictions.jsonl"
    name = f"with-{label}"
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", f"ir-custom,{label}", "--ensemble", name,
               "--predictions", f"{label}={dev}", env=env)
    assert done.returncode == 0, done.stderr
    message = f"the ensemble {name} reads part {label!r} from a predictions file: give --predictions {label}=FILE"
    done = run("eval", "--method", "ensemble", "--dataset", "us", "--ensemble", name, env=env)
    assert done.returncode == 2 and done.stderr.strip() == f"openqa: error: {message}", done.stderr
    record_file = root / "tuned" / f"ensemble-{name}-us.json"
    record = json.loads(record_file.read_text())
    assert record["chosen"]["from_files"] == [label]
    if label == "ext":  # a record fitted before the parts read from files were listed: a part no method runs
        del record["chosen"]["from_files"]
        record_file.write_text(json.dumps(record))
        done = run("eval", "--method", "ensemble", "--dataset", "us", "--ensemble", name, env=env)
        assert done.returncode == 2 and done.stderr.strip() == f"openqa: error: {message}", done.stderr


@pytest.mark.spawns
def test_what_a_predictions_file_lacks_is_said_in_one_line(site, tmp_path):
    root, env = site
    source = root / "results" / "us-dev-pmi.predictions.jsonl"
    lines = source.read_text().splitlines()
    short = tmp_path / "short.jsonl"
    short.write_text(lines[0] + "\n")
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,pmi", "--ensemble", "x",
               "--predictions", f"pmi={short}", env=env)
    last = done.stderr.strip().splitlines()[-1]  # after the progress bars of the parts that ran
    assert done.returncode == 2 and last.startswith("openqa: error: ") and "short.jsonl: no scores for question us-dev-2" in last
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", "ir-custom,pmi", "--predictions", f"llm={short}", env=env)
    assert done.returncode == 2 and "--predictions names part 'llm', which is not among the parts" in done.stderr
    done = run("eval", "--dataset", "us", "--predictions", f"pmi={short}", env=env)
    assert done.returncode == 2 and "--predictions and --ensemble apply to --method ensemble" in done.stderr
    for bad, message in (('{"digest": "d", "scores": {"A": "x"}, "scale": "logits"}', "the score of A is 'x'"),
                         ('{"digest": "d", "scores": {"A": 1}, "scale": "percent"}', '"scale" must be one of standardized, '
                          "probability, logits \\(or the former log-probability\\), not 'percent'"),
                         ('{"scores": {"A": 1}, "scale": "logits"}', "the row names no question"),
                         ("[1, 2]", "expected an object")):
        (tmp_path / "bad.jsonl").write_text(bad + "\n")
        with pytest.raises(DataError, match=f"bad.jsonl:1: {message}"):
            PrecomputedScorer(tmp_path / "bad.jsonl", "part")


@pytest.mark.parametrize("score, shown", [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"), ("1e308", "1e+308"),
                                          ("1" + "0" * 400, "10000000000000000000... (401 characters)")])
def test_a_score_that_would_drop_a_vote_is_refused_at_its_line(tmp_path, score, shown):
    good = '{"digest": "d1", "scores": {"A": 0.5, "B": 0.2}, "scale": "log-probability"}'
    (tmp_path / "p.jsonl").write_text(good + "\n" + good.replace("d1", "d2").replace("0.2", score) + "\n")
    with pytest.raises(DataError) as raised:
        PrecomputedScorer(tmp_path / "p.jsonl", "ext")
    assert str(raised.value) == (f"{tmp_path / 'p.jsonl'}:2: the score of B is {shown}, not a finite number of at most "
                                 "1e+12 in size (give null for no score)")


@pytest.mark.parametrize("scale", ["probability", "log-probability"])
@pytest.mark.parametrize("score", ["2.0", "-0.5", "1.0000001"])
def test_a_probability_outside_0_and_1_is_refused_at_its_line(tmp_path, scale, score):
    """NL5: such a part was read as if it were probabilities (2.0 floored, logged) and fitted."""
    good = f'{{"digest": "d1", "scores": {{"A": 1, "B": 0.0, "C": null}}, "scale": "{scale}"}}'
    (tmp_path / "p.jsonl").write_text(good + "\n" + good.replace("d1", "d2").replace("0.0", score) + "\n")
    with pytest.raises(DataError) as raised:
        PrecomputedScorer(tmp_path / "p.jsonl", "ext")
    assert str(raised.value) == (f"{tmp_path / 'p.jsonl'}:2: the score of B is {float(score)!r}, not a probability from 0 "
                                 "to 1 (the row's scale is probability)")
    (tmp_path / "p.jsonl").write_text(good.replace(scale, "logits") + "\n" + good.replace("d1", "d2").replace("0.0", score)
                                      .replace(scale, "logits") + "\n")
    assert PrecomputedScorer(tmp_path / "p.jsonl", "ext").by_digest["d2"]["scores"]["B"] == float(score)


def test_a_question_scored_twice_otherwise_is_refused_and_the_same_row_twice_is_read(tmp_path):
    path = tmp_path / "p.jsonl"
    row = '{"digest": "d1", "scores": {"A": 0.5, "B": 0.2}, "scale": "log-probability"}'
    path.write_text(row + "\n" + row + "\n")  # a question asked twice in the exam, scored alike
    assert PrecomputedScorer(path, "ext").by_digest["d1"]["scores"] == {"A": 0.5, "B": 0.2}
    path.write_text(row + "\n\n" + row.replace("0.2", "0.9") + "\n")
    with pytest.raises(DataError) as raised:
        PrecomputedScorer(path, "ext")
    assert str(raised.value) == (f"{path}:3: question digest 'd1' is scored again, with other scores than on line 1: "
                                 "keep one row per question")


def test_rows_are_matched_by_content_and_the_minimal_form_reads():
    q = Question("any-id", "Which drug inhibits cyclooxygenase?", {"A": "Aspirin", "B": "Gentamicin"}, "A", "Aspirin")
    same = Question("other-id", "Which drug inhibits cyclooxygenase?", {"A": "Aspirin", "B": "Gentamicin"}, "A", "Aspirin")
    swapped = Question("x", "Which drug inhibits cyclooxygenase?", {"A": "Gentamicin", "B": "Aspirin"}, "B", "Aspirin")
    assert q.digest() == same.digest() != swapped.digest()  # by text and lettered options, never by id



def test_probabilities_read_alike_under_the_scale_s_name_and_its_former_name(tmp_path):
    q = Question("q1", "Which drug inhibits cyclooxygenase?", {"A": "Aspirin", "B": "Gentamicin"}, "A", "Aspirin")
    row = {"digest": q.digest(), "scores": {"A": 0.6, "B": 0.2}}
    read = {}
    for name in ("probability", "log-probability"):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({**row, "scale": name}) + "\n")
        read[name] = PrecomputedScorer(tmp_path / f"{name}.jsonl", "llm")
    # two rows of one file, one under each name: one scale
    (tmp_path / "both.jsonl").write_text(json.dumps({**row, "scale": "log-probability"}) + "\n"
                                         + json.dumps({**row, "digest": "d2", "scale": "probability"}) + "\n")
    read["both"] = PrecomputedScorer(tmp_path / "both.jsonl", "llm")
    for scorer in read.values():
        assert scorer.scale == "probability"
        (result,) = scorer.score([q])
        assert result.scores == {"A": 0.6, "B": 0.2}
        # the softmax of the logs of 0.6 and 0.2: the probabilities normalised
        assert uncalibrated(scorer.scale).probabilities(result) == pytest.approx({"A": 0.75, "B": 0.25})
        assert letter_prior([result], scorer.scale) == pytest.approx({"A": 0.75, "B": 0.25})


def test_a_committed_part_written_under_the_former_name_reads_as_when_its_ensemble_was_fitted():
    """The LLM part of US dev (committed with ``"scale": "log-probability"``) gives the letter prior
    that ``openqa tune`` fitted from it and shipped with the ensemble."""
    root = Path(__file__).resolve().parents[1]
    part = root / "eval" / "results" / "llm-parts" / "qwen2.5-coder-1.5b-q4km-options-t512-cc324af070c2-us-dev.jsonl"
    assert {json.loads(line)["scale"] for line in part.read_text().splitlines()} == {"log-probability"}
    scorer = PrecomputedScorer(part, "llm")
    assert scorer.scale == "probability" and len(scorer.by_digest) == 1000
    anyone = Question("q", "any", {letter: letter for letter in "ABCD"}, "A", "A")  # letter_prior reads the scores alone
    results = [OptionScores(anyone, {letter: score for letter, score in row["scores"].items()}) for row in scorer.by_digest.values()]
    fitted = json.loads((root / "openqa" / "tuned" / "ensemble-qwen2.5-coder-1.5b-q4km-cc324af0-options-t512-dev1000-us.json").read_text())
    assert "--predictions llm=eval/results/llm-parts/" + part.name in fitted["command"]
    assert letter_prior(results, scorer.scale) == fitted["chosen"]["letter_priors"]["llm"]


@pytest.mark.parametrize("label", ["a|b\nc", "a\tb", "a/b", "a|b"])
def test_a_part_label_is_checked_like_an_ensemble_name(tmp_path, capsys, label):
    """NL6: such a label broke the report's Markdown table (a newline, a '|') or would name files."""
    from openqa.cli import main
    from openqa.errors import OpenQAError
    from openqa.methods.base import Request
    from tests.helpers import make_data_dir

    message = (f"ensemble part label {label!r} is not usable: give --predictions PART=FILE with letters, digits, '.', '_' "
               "or '-' (at most 64, starting with a letter or digit)")
    with pytest.raises(OpenQAError) as raised:
        Request(predictions=((label, "p.jsonl"),))
    assert str(raised.value) == message
    (tmp_path / "p.jsonl").write_text('{"digest": "d", "scores": {"A": 0.5, "B": 0.5}, "scale": "probability"}\n')
    (tmp_path / "tuned").mkdir()
    code = main(["tune", "--method", "ensemble", "--dataset", "us", "--parts", f"ir-custom,{label}", "--predictions",
                 f"{label}={tmp_path / 'p.jsonl'}", "--data-dir", str(make_data_dir(tmp_path)), "--index-dir",
                 str(tmp_path / "indexes"), "--settings-dir", str(tmp_path / "tuned")])
    assert code == 2 and capsys.readouterr().err == f"openqa: error: {message}\n"
    assert not list((tmp_path / "tuned").iterdir()) and not (tmp_path / "indexes").exists()


def test_help_says_a_method_s_name_as_part_label_reads_that_part_from_the_file(capsys):
    """NL6: ``--predictions pmi=FILE`` reads the pmi part instead of running it, as ``llm=FILE`` does
    (the documented use, ``test_a_part_read_from_predictions_gives_the_figures_of_running_it``): said in --help."""
    from openqa.cli import main

    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "pmi=FILE: the pmi part's scores are read, not run; a fit lists such parts under from_files" in shown
