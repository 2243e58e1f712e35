"""The results page of ``openqa serve --results DIR``: every run of a folder of eval records (an
unreadable one listed with its reason, never breaking the list), a run's questions, comparisons of
runs, a run's risk-coverage curve and reliability diagram (checked against a case worked out by
hand); the same data from ``openqa.browse_results`` and ``openqa.result_curves``; nothing outside the
folder readable through it; and the page in a real browser (list, sort, filter, a run's questions
beside another run's, its charts, a question re-asked with its evidence marked, a comparison)."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from openqa import DataError, UsageError, browse_results, result_curves
from openqa.evaluate.calibration import curves
from openqa.serve.app import create_app
from tests.helpers import run as run_env
from tests.helpers import site_env, write_run
from tests.servers import call, running, tiny_engines


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two real runs of the tiny site (ir-custom and pmi on US dev), a half-written record and a
    JSON file that is no eval record."""
    root = tmp_path_factory.mktemp("results")
    env = site_env(root)
    for method in ("ir-custom", "pmi"):
        done = run_env("eval", "--dataset", "us", "--split", "dev", "--method", method, env=env)
        assert done.returncode == 0, done.stderr
    results = root / "results"
    (results / "broken.json").write_text('{"dataset": "us", "split": "te')
    (results / "bench-thing.json").write_text(json.dumps({"method": "a benchmark", "n": 3}))
    return root, results


@pytest.mark.spawns
def test_the_runs_their_questions_and_nothing_outside(folder):
    _, results = folder
    runs = browse_results(results)
    names = {r["run"]: r for r in runs}
    assert set(names) == {"us-dev-ir-custom.json", "us-dev-pmi.json", "broken.json"}
    assert names["broken.json"]["unreadable"].startswith("ValueError")
    good = names["us-dev-ir-custom.json"]
    assert good["dataset"] == "us" and good["n"] == 2 and good["questions"] and good["openqa_version"]
    rows = browse_results(results, "us-dev-ir-custom.json")
    assert len(rows) == 2 and {"qid", "prediction", "answer", "correct", "probabilities"} <= set(rows[0])
    for bad in ("../results/us-dev-pmi.json", "/etc/passwd", ".hidden", "nope"):
        with pytest.raises(UsageError, match="no run named"):
            browse_results(results, bad)


def folders_of_runs(tmp_path):
    """A results tree laid out as eval/results: a run directly inside, one in runs/us/ and one of
    the same name in runs/mainland/ (right on other questions), each with its predictions."""
    results = tmp_path / "results"
    for where, name, right in (("", "top", {0}), ("runs/us", "same", {0, 1, 2}), ("runs/mainland", "same", {5})):
        (results / where).mkdir(parents=True, exist_ok=True)
        path = write_run(results / where, name, right, n=10)
        predictions = (results / where / f"{name}.predictions.jsonl").read_bytes()
        path.write_text(json.dumps({**json.loads(path.read_text()),
                                    "result_files": {f"{name}.predictions.jsonl": hashlib.sha256(predictions).hexdigest()}}))
    return results


def test_each_run_is_listed_with_its_folder_and_named_by_it(tmp_path):
    results = folders_of_runs(tmp_path)
    listed = sorted((r["folder"], r["run"], r["accuracy"]) for r in browse_results(results))
    assert listed == [("", "top.json", 10.0), ("runs/mainland", "same.json", 10.0), ("runs/us", "same.json", 30.0)]
    right = {name: sum(row["correct"] for row in browse_results(results, name))
             for name in ("runs/us/same.json", "runs/mainland/same", "same", "top.json")}
    assert right == {"runs/us/same.json": 3, "runs/mainland/same": 1, "same": 1, "top.json": 1}  # a plain name: the first by path
    assert result_curves(results, "runs/us/same")["n"] == 10 and result_curves(results, "runs/us/same")["run"] == "runs/us/same"
    for bad in ("runs/../top.json", "runs/us/../../top.json", "../results/top.json", "/etc/passwd", str(results / "top.json"),
                "runs/.hidden/same", "runs//us/same", "runs/us/", "runs\\us\\same", "runs/taiwan/same", "runs/us"):
        with pytest.raises(UsageError, match="no run named") as refused:
            browse_results(results, bad)
        assert "\n" not in str(refused.value)
    with pytest.raises(UsageError, match=r"no '\.\.', leading '/' or hidden part"):
        result_curves(results, "runs/../../etc/passwd")


def test_the_server_takes_a_run_with_its_folder_and_refuses_dot_dot(tmp_path):
    results = folders_of_runs(tmp_path)
    engines = tiny_engines(tmp_path / "site", ["ir-custom"])
    try:
        with running(create_app(engines, results=results)) as url:
            status, listing = call(url, "/v1/results")
            assert status == 200 and {(r["folder"], r["run"]) for r in listing["runs"]} == {
                ("", "top.json"), ("runs/us", "same.json"), ("runs/mainland", "same.json")}
            for asked in ("runs/us/same.json", "runs%2Fus%2Fsame.json"):  # as typed, and as the page encodes it
                status, run = call(url, f"/v1/results/{asked}")
                assert status == 200 and sum(q["correct"] for q in run["questions"]) == 3, asked
                status, drawn = call(url, f"/v1/results/{asked}/curves")
                assert status == 200 and drawn == result_curves(results, "runs/us/same.json"), asked
            status, compared = call(url, "/v1/compare?runs=runs/mainland/same.json,runs/us/same.json")
            assert status == 200 and compared["pairs"][0]["difference"] == 20.0
            for bad in ("runs/us/..%2F..%2Ftop.json", "runs%2F..%2Ftop.json", "%2Fetc%2Fpasswd"):
                for path in (f"/v1/results/{bad}", f"/v1/results/{bad}/curves", f"/v1/compare?runs=top.json,{bad}"):
                    status, body = call(url, path)
                    assert status in (400, 404), (path, status)
                    assert status == 404 or "no run named" in body["error"], (path, body)
    finally:
        engines.close()


@pytest.mark.spawns
def test_a_run_with_a_malformed_confidence_is_refused_in_one_line(folder, tmp_path):
    _, results = folder
    shutil.copy(results / "us-dev-pmi.json", tmp_path / "bad.json")
    rows = (results / "us-dev-pmi.predictions.jsonl").read_text().splitlines()
    row = json.loads(rows[0]) | {"confidence": "high"}
    (tmp_path / "bad.predictions.jsonl").write_text("\n".join([json.dumps(row), *rows[1:]]) + "\n")
    with pytest.raises(DataError, match="not a number"):
        result_curves(tmp_path, "bad.json")


def test_curves_by_hand():
    # four answers: confidences 0.9 (right), 0.8 (wrong), 0.8 (right), 0.3 (wrong). The two at 0.8 are
    # tied, so the 2nd and 3rd most confident share their one right answer: 1, 1.5, 2 and 2 right
    # among the 1, 2, 3 and 4 most confident. Bins of 0.1: [0.9, 1] holds 1 right of 1, [0.8, 0.9)
    # 1 of 2 at mean 0.8, [0.3, 0.4) 0 of 1. ECE = (|1 - 0.9| + |1 - 1.6| + |0 - 0.3|) / 4 = 0.25.
    drawn = curves(np.array([0.9, 0.8, 0.8, 0.3]), np.array([True, False, True, False]), points=4)
    assert drawn["coverage"] == [[25.0, 100.0], [50.0, 75.0], [75.0, 66.67], [100.0, 50.0]]
    assert drawn["reliability"] == [
        {"low": 0.3, "high": 0.4, "n": 1, "confidence": 30.0, "accuracy": 0.0},
        {"low": 0.8, "high": 0.9, "n": 2, "confidence": 80.0, "accuracy": 50.0},
        {"low": 0.9, "high": 1.0, "n": 1, "confidence": 90.0, "accuracy": 100.0},
    ]
    assert drawn["ece"] == 0.25 and drawn["n"] == 4
    assert curves(np.array([]), np.array([]))["coverage"] == []


@pytest.mark.spawns
def test_the_server_gives_them_only_when_asked(folder, tmp_path):
    root, results = folder
    engines = tiny_engines(tmp_path, ["ir-custom"])
    try:
        with running(create_app(engines)) as url:
            assert call(url, "/v1/results")[0] == 404  # off unless --results is given
        with running(create_app(engines, results=results)) as url:
            status, listing = call(url, "/v1/results")
            assert status == 200 and len(listing["runs"]) == 3
            status, run = call(url, "/v1/results/us-dev-pmi.json")
            assert status == 200 and len(run["questions"]) == 2 and run["questions"][0]["question"]  # texts from the data folder
            status, compared = call(url, "/v1/compare?runs=us-dev-ir-custom.json,us-dev-pmi.json")
            assert status == 200 and compared["common_questions"] == 2 and len(compared["pairs"]) == 1
            assert call(url, "/v1/results/..%2F..%2Fetc%2Fpasswd")[0] in (400, 404)
            assert call(url, "/v1/compare?runs=us-dev-pmi.json,broken.json")[0] == 400
            status, drawn = call(url, "/v1/results/us-dev-pmi.json/curves")
            assert status == 200 and drawn == result_curves(results, "us-dev-pmi.json")
            assert drawn["n"] == 2 and len(drawn["coverage"]) == 2 and drawn["chance"] == 25.0
            assert call(url, "/v1/results/..%2Fx.json/curves")[0] in (400, 404)
    finally:
        engines.close()


CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def chrome():
    """A headless Chromium driven by Selenium."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))


@pytest.mark.spawns
@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Chromium not installed (bash scripts/install_dev.sh installs it)")
def test_the_page_lists_filters_opens_and_compares_runs(folder, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    _, results = folder
    engines = tiny_engines(tmp_path, ["ir-custom"])
    driver = chrome()
    wait = WebDriverWait(driver, 20)
    try:
        with running(create_app(engines, results=results)) as url:
            driver.get(url + "/results")
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 2)
            assert "broken.json" in driver.find_element(By.ID, "unreadable").text
            driver.find_element(By.ID, "filter").send_keys("pmi")
            wait.until(lambda d: [r.get_attribute("data-run") for r in d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")]
                       == ["us-dev-pmi.json"])
            driver.find_element(By.ID, "filter").clear()
            driver.find_element(By.ID, "filter").send_keys(" ")  # an input event with nothing to filter by
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 2)
            driver.find_element(By.CSS_SELECTOR, "#runs th[data-key='method']").click()
            methods = [r.find_elements(By.TAG_NAME, "td")[4].text for r in driver.find_elements(By.CSS_SELECTOR, "#runs tbody tr")]
            assert methods == sorted(methods)
            driver.find_element(By.CSS_SELECTOR, "tr[data-run='us-dev-ir-custom.json'] a.open-run").click()
            wait.until(lambda d: "of 2 questions" in d.find_element(By.ID, "run-count").text)
            opened, other = "us-dev-ir-custom.json", "us-dev-pmi.json"
            assert driver.find_elements(By.CSS_SELECTOR, "#questions .question-text")  # the question's text is shown
            # its risk-coverage curve and reliability diagram, one line each
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#run-charts figure polyline.series")) == 2)
            # beside the other run: the pair filters count what the two predictions files say
            Select(driver.find_element(By.ID, "beside")).select_by_value(other)
            wait.until(lambda d: "also in" in d.find_element(By.ID, "run-count").text)
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#run-charts figure polyline.series")) == 4)
            mine, theirs = ({r["qid"]: r for r in browse_results(results, name)} for name in (opened, other))
            expected = {"disagree": sum(mine[q]["prediction"] != theirs[q]["prediction"] for q in mine),
                        "only-this": sum(mine[q]["correct"] and not theirs[q]["correct"] for q in mine),
                        "only-other": sum(theirs[q]["correct"] and not mine[q]["correct"] for q in mine)}
            for which, count in expected.items():
                Select(driver.find_element(By.ID, "which")).select_by_value(which)
                wait.until(lambda d, count=count: d.find_element(By.ID, "run-count").text.startswith(f"{count} of 2 questions"))
                assert len(driver.find_elements(By.CSS_SELECTOR, "#questions > li")) == count
            Select(driver.find_element(By.ID, "which")).select_by_value("all")
            # re-asked through /v1/answer with the run's method (the server has ir-custom, not pmi)
            driver.find_element(By.CSS_SELECTOR, "#questions button.reask").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".reasked .verdict"))
            assert "the same answer and probabilities as the run" in driver.find_element(By.CSS_SELECTOR, ".reasked .verdict").text
            assert driver.find_elements(By.CSS_SELECTOR, ".reasked details[open] .paragraph mark")  # matched words marked
            driver.find_element(By.CSS_SELECTOR, "tr[data-run='us-dev-pmi.json'] a.open-run").click()
            wait.until(lambda d: "--method pmi --lang en" in d.find_element(By.ID, "run-reask").text)
            wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#questions button.reask"))  # its questions, no re-ask
            assert len(driver.find_elements(By.CSS_SELECTOR, "#questions > li")) == 2
            for tick in driver.find_elements(By.CSS_SELECTOR, "input.tick"):  # the runs' boxes, not the charts' axis labels
                tick.click()
            wait.until(lambda d: d.find_element(By.ID, "compare").is_enabled())
            driver.find_element(By.ID, "compare").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#pairs tr"))
            assert "2 common questions" in driver.find_element(By.ID, "comparison-body").text
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#comparison-charts figure polyline.series")) == 4)
            driver.save_screenshot(str(tmp_path / "results.png"))
    finally:
        driver.quit()
        engines.close()


@pytest.fixture(scope="module")
def faulty(folder, tmp_path_factory):
    """A results folder holding the tiny site's two runs, a link to one of them, and faulty runs: a
    NaN confidence, a NaN accuracy, a ci95 that is no pair of numbers, an ECE that is text, a
    predictions line that is no JSON, a run linked from outside the folder and a run whose
    predictions are; with the server over it (its URL)."""
    _, results = folder
    root = tmp_path_factory.mktemp("faulty")
    served, outside = root / "served", root / "outside"
    served.mkdir()
    outside.mkdir()
    record = json.loads((results / "us-dev-pmi.json").read_text())
    rows = (results / "us-dev-pmi.predictions.jsonl").read_text()

    def add(where, name, summary=record, predictions=rows):
        (where / f"{name}.json").write_text(json.dumps(summary))
        (where / f"{name}.predictions.jsonl").write_text(predictions)

    for name in ("us-dev-ir-custom", "us-dev-pmi"):
        for suffix in (".json", ".predictions.jsonl"):
            shutil.copy(results / f"{name}{suffix}", served / f"{name}{suffix}")
    (served / "alias.json").symlink_to(served / "us-dev-pmi.json")  # a link inside the folder: a run as any
    (served / "alias.predictions.jsonl").symlink_to(served / "us-dev-pmi.predictions.jsonl")
    first, *rest = rows.splitlines()
    add(served, "nan-confidence", predictions="\n".join([json.dumps(json.loads(first) | {"confidence": float("nan")}), *rest]) + "\n")
    add(served, "nan-accuracy", record | {"accuracy": float("nan")})
    add(served, "bad-ci", record | {"ci95": "wide"})
    add(served, "bad-ece", record | {"confidence": {**record["confidence"], "ece": "low"}})
    add(served, "bad-rows", predictions="no json here\n")
    add(outside, "secret")
    for suffix in (".json", ".predictions.jsonl"):
        (served / f"link-out{suffix}").symlink_to(outside / f"secret{suffix}")
    (served / "half-out.json").write_text(json.dumps(record))
    (served / "half-out.predictions.jsonl").symlink_to(outside / "secret.predictions.jsonl")
    engines = tiny_engines(root / "site", ["ir-custom"])
    try:
        with running(create_app(engines, results=served)) as url:
            yield served, url
    finally:
        engines.close()


@pytest.mark.spawns
def test_a_record_with_figures_that_are_no_numbers_is_listed_unreadable_and_the_others_shown(faulty):
    served, url = faulty
    status, listing = call(url, "/v1/results")
    assert status == 200, listing
    names = {row["run"]: row for row in listing["runs"]}
    assert names == {row["run"]: row for row in browse_results(served)}
    for name, figure in (("nan-accuracy.json", "accuracy"), ("bad-ci.json", "ci95"), ("bad-ece.json", "ece")):
        assert f"its {figure} is not a number" in names[name]["unreadable"]
    for name in ("us-dev-ir-custom.json", "us-dev-pmi.json", "alias.json", "nan-confidence.json"):
        assert "unreadable" not in names[name] and isinstance(names[name]["accuracy"], float)


@pytest.mark.spawns
def test_links_out_of_the_folder_are_neither_listed_nor_served(faulty):
    served, url = faulty
    listed = {row["run"]: row for row in browse_results(served)}
    assert "link-out.json" not in listed
    # a record inside whose predictions link out: listed, but not offered for opening (page and API alike)
    assert listed["half-out.json"]["questions"] is False and listed["alias.json"]["questions"] is True
    assert {row["run"]: row for row in call(url, "/v1/results")[1]["runs"]}["half-out.json"]["questions"] is False
    for name in ("link-out.json", "half-out.json"):
        with pytest.raises(UsageError, match="no run named"):
            browse_results(served, name)
        with pytest.raises(UsageError, match="no run named"):
            result_curves(served, name)
        assert call(url, f"/v1/results/{name}")[0] == 400
        assert call(url, f"/v1/results/{name}/curves")[0] == 400
        status, refused = call(url, f"/v1/compare?runs=us-dev-pmi.json,{name}")
        assert status == 400 and "no run named" in refused["error"]
    assert len(browse_results(served, "alias.json")) == 2  # a link that stays inside is a run as any


@pytest.mark.spawns
def test_bad_requests_are_refused_in_one_line(faulty):
    _, url = faulty
    long = "r" * 300 + ".json"  # longer than a file name may be
    for path in (f"/v1/results/{long}", f"/v1/results/{long}/curves", f"/v1/compare?runs=us-dev-pmi.json,{long}"):
        status, body = call(url, path)
        assert status == 400 and "no run named" in body["error"], (path, body)
    for path in ("/v1/results/nan-confidence.json", "/v1/results/nan-confidence.json/curves",
                 "/v1/compare?runs=us-dev-pmi.json,nan-confidence.json"):
        status, body = call(url, path)
        assert status == 400 and "nan-confidence" in body["error"] and "not a number" in body["error"], (path, body)
    status, body = call(url, "/v1/compare?runs=" + ",".join(["us-dev-pmi.json", "us-dev-ir-custom.json"] * 5))
    assert status == 400 and "at most 8 runs" in body["error"]
    for twice in ("us-dev-pmi.json,us-dev-pmi.json", "us-dev-pmi,us-dev-ir-custom.json,us-dev-pmi.json", "us-dev-pmi.json,alias.json"):
        status, body = call(url, f"/v1/compare?runs={twice}")
        assert status == 400 and "more than once" in body["error"], (twice, body)
    status, compared = call(url, "/v1/compare?runs=" + ",".join(["us-dev-pmi.json", "us-dev-ir-custom.json"]))
    assert status == 200 and len(compared["pairs"]) == 1


@pytest.mark.spawns
def test_no_error_names_the_results_folder_by_its_absolute_path(faulty):
    served, url = faulty
    bodies = [call(url, path) for path in ("/v1/results/bad-rows.json", "/v1/results/bad-rows.json/curves",
                                           "/v1/compare?runs=us-dev-pmi.json,bad-rows.json", "/v1/results/nope.json",
                                           "/v1/compare?runs=nan-confidence.json,us-dev-pmi.json")]
    assert all(status == 400 for status, _ in bodies), bodies
    assert all(str(served) not in json.dumps(body) and str(served.resolve()) not in json.dumps(body) for _, body in bodies)
    assert bodies[0][1]["error"].startswith("bad-rows.predictions.jsonl:1: not valid JSON")  # named relative to the folder


@pytest.mark.spawns
@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Chromium not installed (bash scripts/install_dev.sh installs it)")
def test_the_page_shows_the_readable_runs_beside_unreadable_ones(faulty):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    served, url = faulty
    readable = sorted(row["run"] for row in browse_results(served) if "unreadable" not in row)
    driver = chrome()
    try:
        driver.get(url + "/results")
        WebDriverWait(driver, 20).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == len(readable))
        assert sorted(r.get_attribute("data-run") for r in driver.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == readable
        shown = driver.find_element(By.ID, "unreadable").text
        assert all(name in shown for name in ("nan-accuracy.json", "bad-ci.json", "bad-ece.json"))
    finally:
        driver.quit()


@pytest.mark.spawns
@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Chromium not installed (bash scripts/install_dev.sh installs it)")
def test_a_run_longer_than_the_listing_is_said_to_be_cut_and_its_curves_count_it_all(tmp_path):
    """A run of 20,001 questions: its listing holds the first 20,000 and says there are more (it used to
    stop there without a word), its curves count all 20,001, and the page says both cuts (20,000 listed,
    500 shown) with the run brought into sight."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from openqa.evaluate.browse import MAX_QUESTIONS
    from tests.helpers import write_run

    folder = tmp_path / "results"
    folder.mkdir()
    n = MAX_QUESTIONS + 1
    record = json.loads(write_run(folder, "long", set(range(0, n, 2)), n=n).read_text())
    (folder / "long.json").write_text(json.dumps({**record, "result_files": ["long.predictions.jsonl"]}))
    write_run(folder, "short", {0}, n=3)
    (folder / "short.json").write_text(json.dumps({**json.loads((folder / "short.json").read_text()), "result_files": []}))
    engines = tiny_engines(tmp_path / "site", ["ir-custom"])
    driver = chrome()
    try:
        with running(create_app(engines, results=folder)) as url:
            status, listed = call(url, "/v1/results/long.json")
            assert status == 200 and len(listed["questions"]) == MAX_QUESTIONS and listed["cut"] and listed["most"] == MAX_QUESTIONS
            status, short = call(url, "/v1/results/short.json")
            assert status == 200 and len(short["questions"]) == 3 and not short["cut"]
            assert call(url, "/v1/results/long.json/curves")[1]["n"] == n == len(browse_results(folder, "long.json")) + 1
            driver.set_window_size(1200, 700)
            driver.get(url + "/results")
            WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-run='long.json'] a.open-run"))
            driver.find_element(By.CSS_SELECTOR, "tr[data-run='long.json'] a.open-run").click()
            WebDriverWait(driver, 60).until(lambda d: "questions" in d.find_element(By.ID, "run-count").text)
            assert driver.find_element(By.ID, "run-count").text == (
                "20000 of 20000 questions (the first 20,000 of the run's 20,001: the server lists no more of a run); the first 500 shown")
            assert len(driver.find_elements(By.CSS_SELECTOR, "#questions > li")) == 500
            assert driver.execute_script("const r = document.getElementById('run').getBoundingClientRect(); "
                                         "return r.top >= 0 && r.top < window.innerHeight")  # in sight, not below the list
    finally:
        driver.quit()
        engines.close()


@pytest.mark.spawns
@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Chromium not installed (bash scripts/install_dev.sh installs it)")
def test_a_chinese_run_s_questions_are_marked_as_chinese(tmp_path):
    """A mainland run's question text and options carry lang="zh" (the page was English throughout)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.helpers import write_run

    engines = tiny_engines(tmp_path / "site", ["ir-custom"])
    split = engines.ctx.settings.data_dir / "questions" / "Mainland" / "4_options" / "test.jsonl"
    split.parent.mkdir(parents=True)
    options = {"A": "阿司匹林", "B": "头孢曲松", "C": "庆大霉素", "D": "胰岛素"}
    split.write_text(json.dumps({"question": "哪种药物抑制细菌细胞壁合成？", "options": options, "answer": "头孢曲松", "answer_idx": "B"},
                                ensure_ascii=False) + "\n", encoding="utf-8")
    folder = tmp_path / "results"
    folder.mkdir()
    record = json.loads(write_run(folder, "zh-run", {0}, dataset="mainland", n=1).read_text())
    rows = [json.loads(line) | {"qid": "mainland-test-1"} for line in (folder / "zh-run.predictions.jsonl").read_text().splitlines()]
    (folder / "zh-run.predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "zh-run.json").write_text(json.dumps({**record, "result_files": []}))
    driver = chrome()
    try:
        with running(create_app(engines, results=folder)) as url:
            driver.get(url + "/results")
            WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "a.open-run"))
            driver.find_element(By.CSS_SELECTOR, "a.open-run").click()
            WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#questions .question-text"))
            marked = driver.execute_script("""return [...document.querySelectorAll('#questions *')]
                .filter(e => [...e.childNodes].some(n => n.nodeType === 3 && /[\\u3400-\\u9fff]/.test(n.textContent)))
                .map(e => e.closest('[lang]').getAttribute('lang'))""")
            assert len(marked) == 5 and set(marked) == {"zh"}, marked  # the question and its four options
    finally:
        driver.quit()
        engines.close()
