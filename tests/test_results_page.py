"""The results page of ``openqa serve --results DIR``: every run of a folder of eval records (an
unreadable one listed with its reason, never breaking the list), a run's questions, comparisons of
runs; the same data from ``openqa.browse_results``; nothing outside the folder readable through it;
and the page in a real browser (list, sort, filter, a run's questions, a comparison)."""

from __future__ import annotations

import json
import shutil

import pytest

from openqa import UsageError, browse_results
from openqa.serve.app import create_app
from tests.helpers import site_env
from tests.test_calibration import run as run_env
from tests.test_serve import call, running, tiny_engines


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
    finally:
        engines.close()


CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Chromium not installed (bash scripts/install_dev.sh installs it)")
def test_the_page_lists_filters_opens_and_compares_runs(folder, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, results = folder
    engines = tiny_engines(tmp_path, ["ir-custom"])
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
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
            driver.find_element(By.CSS_SELECTOR, "a.open-run").click()
            wait.until(lambda d: "of 2 questions" in d.find_element(By.ID, "run-count").text)
            assert driver.find_elements(By.CSS_SELECTOR, "#questions .question-text")  # the question's text is shown
            for tick in driver.find_elements(By.CSS_SELECTOR, ".tick"):
                tick.click()
            driver.find_element(By.ID, "compare").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#pairs tr"))
            assert "2 common questions" in driver.find_element(By.ID, "comparison-body").text
            driver.save_screenshot(str(tmp_path / "results.png"))
    finally:
        driver.quit()
        engines.close()
