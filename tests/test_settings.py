"""Settings travel with the method: the shipped dev-tuned choices are found from any folder, a
user's own tune overrides them, every setting names its source, and results go where asked."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from openqa.config import OptionSource, prefixed
from openqa.jsonl import readable
from openqa.serve.public import in_request_words
from openqa.tuning import resolve_settings, shipped_folder
from tests.helpers import make_data_dir

OPENQA = str(Path(sys.executable).with_name("openqa"))
REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The installed console script, in ``cwd`` (default: a new empty folder)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENQA_")} | (env or {})
    with tempfile.TemporaryDirectory() as empty:
        return subprocess.run([OPENQA, *args], capture_output=True, text=True, cwd=cwd or empty, env=environ, timeout=600)


def shipped(method: str, dataset: str) -> dict:
    return json.loads((shipped_folder() / f"{method}-{dataset}.json").read_text())["chosen"]


def test_every_shipped_record_is_readable_and_names_its_dataset():
    files = sorted(shipped_folder().glob("*.json"))
    assert {"ir-custom-us.json", "ir-custom-mainland.json", "ir-custom-tw-en.json"} <= {f.name for f in files}
    for path in files:
        record = json.loads(path.read_text())
        kind = ".calibration" if path.name.endswith(".calibration.json") else ""
        assert path.name == f"{record['method']}-{record['dataset']}{kind}.json" and record["split"] == "dev"
        assert record["command"].startswith("openqa tune")


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, None], "b": {"c": [[0, 0], [1, 2]], "d": []}, "e": [{"x": 1}, {"y": [True]}], "f": {}, "g": "é\n"},
    [], {}, 3, "text", [{"a": 1}], [[{"a": [1]}]],
])
def test_tuned_records_read_back_as_written(value):
    assert json.loads(readable(value)) == value


def test_tuned_records_keep_plain_lists_on_one_line():
    value = {"bins": [[0, 0], [3, 1]], "confidences": [0.25, 0.5], "dev": {"n": 2, "parts": [{"w": 1}]}}
    assert readable(value) == "\n".join([
        "{",
        '  "bins": [[0, 0], [3, 1]],',
        '  "confidences": [0.25, 0.5],',
        '  "dev": {',
        '    "n": 2,',
        '    "parts": [',
        "      {",
        '        "w": 1',
        "      }",
        "    ]",
        "  }",
        "}",
    ])


def test_a_calibration_keeps_its_dev_confidences_on_one_line():
    text = (shipped_folder() / "ir-custom-mainland.calibration.json").read_text()
    assert len(text.splitlines()) < 120 and json.loads(text) == json.loads(readable(json.loads(text)))


def test_sources_name_flag_tuned_record_and_default(tmp_path):
    settings, sources = resolve_settings("ir-custom", "us", tmp_path, {"aggregate": "max"})
    assert settings.aggregate == "max" and sources["aggregate"] == "--aggregate"
    assert settings.top_n == shipped("ir-custom", "us")["top_n"]
    assert sources["top_n"] == "shipped with openqa: openqa/tuned/ir-custom-us.json"
    settings, sources = resolve_settings("ir-custom", "no-such-dataset", tmp_path, {})
    assert settings.avg_ql is None and "each query's own length" in sources.pop("avg_ql")
    assert set(sources.values()) == {"default"}


def test_a_source_naming_an_option_is_rendered_by_each_front_end():
    """The command line and records say the flag; the HTTP API its request field; JSON and copies keep the text."""
    lang = OptionSource("lang", "default for ", " en")
    fused = prefixed("ir-custom: ", OptionSource("top_n"))
    assert (lang, fused, prefixed("ir-custom: ", "default")) == ("default for --lang en", "ir-custom: --top-n", "ir-custom: default")
    assert json.dumps({"exam": lang}) == '{"exam": "default for --lang en"}'
    assert pickle.loads(pickle.dumps(fused)).render({"top_n": "request top_n"}) == "ir-custom: request top_n"
    settings = {"top_n": 3, "sources": {"top_n": OptionSource("top_n"), "exam": lang, "query": OptionSource("query"),
                                        "aggregate": "--aggregate as plain text"}, "parts": {"pmi": {"sources": {"top_n": fused}}}}
    assert in_request_words(settings) == {
        "top_n": 3, "sources": {"top_n": "request top_n", "exam": "default for lang en", "query": "--query",
                                "aggregate": "--aggregate as plain text"}, "parts": {"pmi": {"sources": {"top_n": "ir-custom: request top_n"}}}}


def test_query_flag_takes_the_best_dev_row_of_that_mode(tmp_path):
    record = json.loads((shipped_folder() / "ir-custom-us.json").read_text())
    mode = next(m for m in ("phrases", "filter", "full") if m != record["chosen"]["query"])
    best = max((r for r in record["grid"] if r["query"] == mode), key=lambda r: (r["accuracy"], -r["top_n"]))
    settings, sources = resolve_settings("ir-custom", "us", tmp_path, {"query": mode})
    assert (settings.top_n, settings.aggregate, settings.query) == (best["top_n"], best["aggregate"], mode)
    assert sources["query"] == "--query" and f"best dev row for query {mode!r}" in sources["top_n"]
    assert settings.avg_ql == best["avg_ql"] != record["chosen"]["avg_ql"]  # that mode's dev avgQL


@pytest.mark.parametrize("dataset", ["us", "mainland", "tw-en", "us5", "mainland5", "tw", "tw-zh"])
def test_shipped_ir_custom_records_fix_avgql_per_query_mode(dataset):
    """Every shipped IR-Custom record carries avgQL, measured on its dev queries, in its choice and
    in each grid row (one value per query mode), so no test statistic ever enters a test score."""
    record = json.loads((shipped_folder() / f"ir-custom-{dataset}.json").read_text())
    by_mode = {row["query"]: row["avg_ql"] for row in record["grid"]}
    assert all(isinstance(v, float) and v >= 1 for v in by_mode.values())
    assert all(row["avg_ql"] == by_mode[row["query"]] for row in record["grid"])
    assert record["chosen"]["avg_ql"] == by_mode[record["chosen"]["query"]]


@pytest.fixture(scope="module")
def fixture_data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("settings"))


@pytest.mark.spawns
def test_answer_uses_the_exams_tuned_settings(fixture_data, tmp_path):
    zh_books = fixture_data / "textbooks" / "zh_paragraph"
    zh_books.mkdir(exist_ok=True)
    (zh_books / "内科学.txt").write_text("头孢曲松抑制细菌细胞壁合成，用于治疗淋球菌感染。\n庆大霉素是氨基糖苷类抗生素，抑制核糖体。\n")
    loc = ["--data-dir", str(fixture_data), "--index-dir", str(tmp_path / "indexes")]
    for lang, dataset in (("zh", "mainland"), ("en", "us")):
        result = run("answer", "--lang", lang, "--question", "哪种药物抑制细胞壁合成？" if lang == "zh" else "Which drug blocks cell walls?",
                     "--option", "A=庆大霉素" if lang == "zh" else "A=Gentamicin", "--option", "B=头孢曲松" if lang == "zh" else "B=Ceftriaxone",
                     "--json", *loc)
        assert result.returncode == 0, result.stderr
        settings = json.loads(result.stdout)["settings"]
        chosen = shipped("ir-custom", dataset)
        assert {k: settings[k] for k in ("top_n", "aggregate", "query")} == {k: chosen[k] for k in ("top_n", "aggregate", "query")}
        tuned_on = len(json.loads((shipped_folder() / f"ir-custom-{dataset}.json").read_text())["corpus_fingerprint"]["books"])
        where = f"shipped with openqa: openqa/tuned/ir-custom-{dataset}.json, tuned on {tuned_on} books; this corpus has {dict(zh=1, en=2)[lang]}"
        assert settings["sources"]["top_n"] == where  # the fixture's books are not the corpus the shipped choice was made on
        assert settings["exam"] == {"zh": "mcmle", "en": "usmle"}[lang]
        assert f"({where})" in result.stderr  # the one settings line
        assert result.stderr.count(f"openqa: settings tuned on {tuned_on} books") == 1  # and one note


@pytest.mark.spawns
def test_your_tune_overrides_the_shipped_choice_and_results_go_where_asked(fixture_data, tmp_path):
    loc = ["--data-dir", str(fixture_data), "--index-dir", str(tmp_path / "indexes")]
    tuned = run("tune", "--dataset", "us", *loc)
    assert tuned.returncode == 0, tuned.stderr
    mine = tmp_path / "tuned" / "ir-custom-us.json"  # beside the index folder
    assert mine.is_file() and str(mine) in tuned.stdout
    result = run("eval", "--dataset", "us", "--json", *loc, env={"OPENQA_RESULTS": str(tmp_path / "results")})
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["settings"]["sources"]["top_n"] == "your openqa tune: tuned/ir-custom-us.json"  # no machine path
    assert summary["settings"]["top_n"] == json.loads(mine.read_text())["chosen"]["top_n"]
    assert summary["files"]["summary"] == str(tmp_path / "results" / "us-test-ir-custom.json")
    (tmp_path / "empty").mkdir()
    elsewhere = run("eval", "--dataset", "us", "--json", *loc, "--settings-dir", str(tmp_path / "empty"), "--output", str(tmp_path / "o"))
    assert json.loads(elsewhere.stdout)["settings"]["sources"]["top_n"].startswith("shipped with openqa")
    assert (tmp_path / "o" / "us-test-ir-custom.json").is_file()


@pytest.mark.spawns
def test_a_settings_folder_asked_for_must_be_a_folder(fixture_data, tmp_path):
    """An explicit --settings-dir or $OPENQA_SETTINGS that is missing or a file would silently drop
    the user's tuned choices: a one-line error instead. Nothing asked for: the shipped choice."""
    loc = ["--data-dir", str(fixture_data), "--index-dir", str(tmp_path / "indexes")]
    (tmp_path / "a-file").write_text("x")
    for flag, env in (([ "--settings-dir", str(tmp_path / "none")], {}), ([], {"OPENQA_SETTINGS": str(tmp_path / "a-file")})):
        result = run("eval", "--dataset", "us", "--limit", "2", *loc, *flag, env=env)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1 and "settings folder" in result.stderr, result.stderr
        assert ("not found" if flag else "is not a folder") in result.stderr


@pytest.mark.spawns
def test_ir_evaluation_does_not_import_torch(fixture_data, tmp_path):
    code = (
        "import sys\n"
        "from openqa.config import Settings\n"
        "from openqa.pipeline import Context, EvalRequest, evaluate\n"
        f"ctx = Context(Settings.resolve({str(fixture_data)!r}, {str(tmp_path / 'ix')!r}, results_dir={str(tmp_path / 'r')!r}))\n"
        "record = evaluate(ctx, EvalRequest(dataset='us', split='dev'), progress=False)\n"
        "assert record['n'] == 2, record\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.spawns
@pytest.mark.slow
def test_same_settings_and_accuracy_from_an_empty_folder_as_from_the_repo(medqa_dir, tmp_path):
    """The installed script gives exactly the shipped tuned settings and the same accuracy anywhere."""
    loc = ["--data-dir", str(medqa_dir), "--index-dir", str(tmp_path / "indexes")]
    summaries = []
    for name, cwd in (("repo", REPO), ("empty", None)):
        result = run("eval", "--dataset", "us", "--split", "dev", "--json", "--output", str(tmp_path / name), *loc, cwd=cwd)
        assert result.returncode == 0, result.stderr
        summaries.append(json.loads(result.stdout))
    repo, empty = summaries
    chosen = shipped("ir-custom", "us")
    for summary in summaries:
        assert {k: summary["settings"][k] for k in ("top_n", "aggregate", "query")} == {k: chosen[k] for k in ("top_n", "aggregate", "query")}
        assert summary["settings"]["sources"]["top_n"] == "shipped with openqa: openqa/tuned/ir-custom-us.json"
    assert (empty["accuracy"], empty["correct"], empty["n"]) == (repo["accuracy"], repo["correct"], repo["n"]) and repo["n"] == 1272
    shipped_record = json.loads((shipped_folder() / "ir-custom-us.json").read_text())
    assert repo["accuracy"] == shipped_record["dev_accuracy"]  # the figure tuning recorded, reproduced


@pytest.mark.spawns
def test_settings_tuned_on_other_books_say_so_once(tmp_path):
    """Settings, calibrations and results carry the fingerprint of the corpus they were made on;
    with a book more in the data folder, eval, answer and the Python API say in one line that the
    settings were tuned on fewer books, and their sources say it too. Without it: not a word."""
    from openqa import Solver, Workspace, corpus_fingerprint

    data = make_data_dir(tmp_path)
    loc = ["--data-dir", str(data), "--index-dir", str(tmp_path / "indexes")]
    tuned = run("tune", "--dataset", "us", *loc)
    assert tuned.returncode == 0, tuned.stderr
    made_on = corpus_fingerprint("en", data_dir=data)
    assert set(made_on["books"]) == {"Cardio", "Micro"} and len(made_on["checksum"]) == 64
    for name in ("ir-custom-us.json", "ir-custom-us.calibration.json"):
        assert json.loads((tmp_path / "tuned" / name).read_text())["corpus_fingerprint"] == made_on
    question = ["--question", "Which drug inhibits cyclooxygenase?", "--option", "A=Aspirin", "--option", "B=Gentamicin"]
    notice = "openqa: settings tuned on 2 books; this corpus has 3: run openqa tune --method ir-custom --dataset us to retune"

    def commands(output: str = "results") -> list[subprocess.CompletedProcess]:
        results = [run("eval", "--dataset", "us", "--split", "dev", "--output", str(tmp_path / output), "--json", *loc),
                   run("answer", *question, "--json", *loc)]
        assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
        return results

    def api_sources() -> dict[str, str]:
        solver = Solver.open("ir-custom", "en", workspace=Workspace(data_dir=data, index_dir=tmp_path / "indexes"))
        return solver.settings["sources"]

    for result in commands():
        assert "openqa: settings tuned" not in result.stderr and "tuned on" not in result.stdout
    assert not any("tuned on" in s for s in api_sources().values())
    evaluated = json.loads(commands()[0].stdout)
    assert evaluated["corpus_fingerprint"] == made_on

    (data / "textbooks" / "en" / "Extra.txt").write_text("Heparin activates antithrombin III.\n")
    assert run("index", "--lang", "en", *loc).returncode == 0
    again = run("eval", "--dataset", "us", "--split", "dev", "--output", str(tmp_path / "results"), *loc)
    assert again.returncode == 2 and "holds a run with another corpus" in again.stderr  # never replaced by another corpus' run
    for result in commands("results-3-books"):
        assert result.stderr.count("openqa: settings tuned") == 1 and notice in result.stderr.splitlines(), result.stderr
        sources = json.loads(result.stdout)["settings"]["sources"]
        assert sources["top_n"] == "your openqa tune: tuned/ir-custom-us.json, tuned on 2 books; this corpus has 3"
        assert sources["probabilities"].endswith("tuned/ir-custom-us.calibration.json, tuned on 2 books; this corpus has 3")
    assert api_sources()["top_n"].endswith("tuned on 2 books; this corpus has 3")
    assert json.loads(commands("results-3-books")[0].stdout)["corpus_fingerprint"]["books"].keys() == {"Cardio", "Extra", "Micro"}
