"""The page of ``openqa serve`` in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by selenium pastes a question, solves it with Ctrl+Enter, and finds the
ranking and the highlighted evidence; also on a phone-sized screen, and the API docs offline.

A screenshot goes to ``$OPENQA_SCREENSHOT`` when set (the README's ``docs/serve.png`` is made so),
else to the test's temporary folder. Skipped when Chromium, its driver or selenium is missing.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from openqa.serve.app import create_app
from tests.helpers import QUESTIONS
from tests.test_serve import running, tiny_engines

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver")
if not (CHROMIUM and DRIVER):
    pytest.skip("Chromium not installed (apt-get install chromium chromium-driver)", allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

#: Seconds a page may take to show what a test waits for.
WAIT = 15
PASTED = "\n".join([QUESTIONS[0]["question"], *(f"{k}: {v}" for k, v in QUESTIONS[0]["options"].items())])


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    """A server whose own tuning (as ``openqa tune`` writes it) judges six paragraphs by the best hit."""
    root = tmp_path_factory.mktemp("browser")
    (root / "tuned").mkdir()
    (root / "tuned" / "ir-custom-us.json").write_text(json.dumps({"chosen": {"top_n": 1, "aggregate": "sum", "query": "full"}}))
    engines = tiny_engines(root, ["ir-custom"])
    with running(create_app(engines)) as base:
        yield base
    engines.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,1100"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def solve(browser, url: str, text: str) -> None:
    """Open the page, paste ``text`` and press Ctrl+Enter."""
    browser.get(url + "/")
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#method option"))
    box = browser.find_element(By.ID, "text")
    box.clear()
    browser.execute_script("arguments[0].value = arguments[1];", box, text)  # what a paste leaves in the box
    box.send_keys(Keys.CONTROL, Keys.ENTER)


def test_pasted_question_is_ranked_with_highlighted_evidence(browser, url, tmp_path):
    solve(browser, url, PASTED)
    WebDriverWait(browser, WAIT).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#ranking li")) == 4)
    assert browser.find_element(By.ID, "prediction").text.startswith("Prediction: C. Ceftriaxone")
    first = browser.find_element(By.CSS_SELECTOR, "#ranking li button")
    assert first.get_attribute("aria-pressed") == "true" and "Ceftriaxone" in first.text
    marks = [m.text for m in browser.find_elements(By.CSS_SELECTOR, "#evidence mark")]
    assert {"Ceftriaxone", "cell", "wall", "synthesis"} <= set(marks)
    assert "Micro" in browser.find_element(By.CSS_SELECTOR, "#evidence .book").text
    screenshot = Path(os.environ.get("OPENQA_SCREENSHOT") or tmp_path / "serve.png")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(screenshot))
    first.send_keys(Keys.ARROW_DOWN)  # the keyboard moves to the next option and shows its evidence
    second = browser.find_elements(By.CSS_SELECTOR, "#ranking li button")[1]
    assert second.get_attribute("aria-pressed") == "true" and browser.switch_to.active_element == second
    assert second.text.split("\n")[1] in browser.find_element(By.ID, "evidence-title").text
    assert [entry["message"] for entry in browser.get_log("browser") if entry["level"] != "INFO"] == []


def test_bad_input_shows_the_servers_one_line_error(browser, url):
    solve(browser, url, "Which drug?\nA: Aspirin")
    error = WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "error").text)
    assert error.startswith("give at least two options")


def test_the_page_fits_a_phone(browser, url):
    browser.set_window_size(390, 844)
    try:
        solve(browser, url, PASTED)
        WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#evidence mark"))
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        browser.set_window_size(1000, 1100)


def test_the_api_docs_render_without_a_network(browser, url):
    browser.get(url + "/docs")
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".opblock"))
    paths = {e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert {"/v1/answer", "/v1/parse", "/v1/methods", "/v1/health"} <= paths
