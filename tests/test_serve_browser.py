"""The page of ``openqa serve`` in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by selenium pastes a question, solves it with Ctrl+Enter, and finds the
ranking and the highlighted evidence; example questions with their answer key; the verdict on a
given correct answer; ties, options without evidence, long options; a disabled Solve that
Ctrl+Enter cannot bypass, late replies dropped (an example clicked, or a question edited and
solved again, while another is out), old results cleared under an error; screen-reader
announcements, focus, copy, keyboard help; text contrast in light and dark mode; a phone-sized
screen, and the API docs offline. The server runs in this process, so a test can slow its scoring.

The documentation's pictures of the page are made by ``scripts/maintenance/screenshot_serve.py``.
Skipped when Chromium, its driver or selenium is missing.
"""

from __future__ import annotations

import json
import shutil
import threading
from typing import Iterator

import pytest

from openqa.evaluate.calibration import Calibration
from openqa.llm.settings import LLMSettings
from openqa.methods import Request
from openqa.serve.app import create_app
from tests.helpers import QUESTIONS, Started
from tests.llm_fixtures import make_tiny_llm
from tests.servers import ZH_BLOCK, gated_scoring, running, tiny_engines

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
    """ir-custom, pmi and a tiny random LLM (closed book) over the tiny site, whose own tuning (as ``openqa tune`` writes it) judges
    six paragraphs by the best hit; its data folder's US test split gives the examples."""
    root = tmp_path_factory.mktemp("browser")
    (root / "tuned").mkdir()
    chosen = {"top_n": 1, "aggregate": "sum", "query": "full"}
    (root / "tuned" / "ir-custom-us.json").write_text(json.dumps({"chosen": chosen}))
    # a calibration as openqa tune writes it: temperature 1, and dev answers that were right 3 times in 4
    bins = [[0, 0]] * 4 + [[4, 3]] * 16
    fitted = Calibration(1.0, "standardized", "us", 64, tuple(map(tuple, bins)), 0.25, chosen)
    (root / "tuned" / "ir-custom-us.calibration.json").write_text(json.dumps({"calibration": fitted.to_dict()}))
    # its own measured accuracy, with the settings it serves with (the repo's records used others)
    (root / "results").mkdir()
    (root / "results" / "us-test-ir-custom.json").write_text(json.dumps({
        "dataset": "us", "split": "test", "method": "ir-custom", "n": 2, "accuracy": 50.0, "corpus": "2 books",
        "settings": {**chosen, "probabilities": "temperature 3.5 (a calibration never changes the accuracy)"}}))
    llm = LLMSettings(model=str(make_tiny_llm(root / "tiny-llm")), evidence="none", cache_dir=root / "llm-cache")
    engines = tiny_engines(root, ["ir-custom", "pmi", "llm"], Request(llm=llm))
    with running(create_app(engines)) as base:
        yield base
    engines.close(0)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-extensions", "--no-first-run", "--window-size=1000,1100"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


#: Counts in ``window.answersRead`` the replies of /v1/answer the page has read and acted on: the count
#: goes up in a task of its own, after the page's handling of the reply (microtasks) is done.
COUNT_ANSWERS = """
window.answersRead = 0;
const realFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await realFetch(...args);
  if (String(args[0]).includes("v1/answer")) {
    const json = response.json.bind(response);
    response.json = async () => {
      try { return await json(); } finally { setTimeout(() => { window.answersRead += 1; }, 0); }
    };
  }
  return response;
};
"""


def open_page(browser, url: str) -> None:
    browser.get(url + "/")
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#method option"))
    browser.execute_script(COUNT_ANSWERS)


def example_buttons(browser) -> list:
    """The page's example questions, once they have arrived (the page fetches them after it opens)."""
    return WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".example"))


def answers_read(browser, count: int) -> None:
    """Wait until the page has read and acted on ``count`` replies of /v1/answer since it opened."""
    WebDriverWait(browser, WAIT).until(lambda b: b.execute_script("return window.answersRead") >= count)


def paste(browser, text: str) -> None:
    box = browser.find_element(By.ID, "text")
    box.clear()
    browser.execute_script("arguments[0].value = arguments[1];", box, text)  # what a paste leaves in the box


def solve(browser, url: str, text: str, method: str | None = None, key: str | None = None) -> None:
    """Open the page, paste ``text`` (choosing the method and correct answer) and press Ctrl+Enter."""
    open_page(browser, url)
    if method:
        browser.execute_script("document.getElementById('method').value = arguments[0];", method)
    if key:
        browser.execute_script("document.getElementById('key').value = arguments[0];", key)
    paste(browser, text)
    browser.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)


def shown(browser) -> str:
    """The prediction heading once a result is shown."""
    WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "prediction").text
                                       and b.find_element(By.ID, "solve").is_enabled())
    return browser.find_element(By.ID, "prediction").text


def ranking(browser) -> list[dict[str, str]]:
    return browser.execute_script("""return [...document.querySelectorAll('#ranking li button')].map(b => ({
        letter: b.dataset.letter, rank: b.querySelector('.rank').textContent, score: b.querySelector('.score').textContent,
        badges: [...b.querySelectorAll('.badge')].map(x => x.textContent).join(','), width: b.querySelector('.fill').style.width}))""")


@pytest.mark.spawns
def test_pasted_question_is_ranked_with_highlighted_evidence(browser, url, tmp_path):
    solve(browser, url, PASTED)
    assert shown(browser).startswith("Prediction: C. Ceftriaxone")
    first = browser.find_element(By.CSS_SELECTOR, "#ranking li button")
    assert first.get_attribute("aria-pressed") == "true" and "Ceftriaxone" in first.text
    marks = [m.text for m in browser.find_elements(By.CSS_SELECTOR, "#evidence mark")]
    assert {"Ceftriaxone", "cell", "wall", "synthesis"} <= set(marks)
    assert "Micro" in browser.find_element(By.CSS_SELECTOR, "#evidence .book").text
    rows = ranking(browser)
    assert "each option's probability" in browser.find_element(By.ID, "bars").text
    chances = [float(row["score"].split("%")[0]) for row in rows]  # "62% · 1.23" then its margin behind the best
    assert chances == sorted(chances, reverse=True) and 98 <= sum(chances) <= 102
    assert [float(row["width"].rstrip("%")) for row in rows] == pytest.approx(chances, abs=0.6)  # bars are probabilities
    assert "−" in rows[1]["score"]
    sure = browser.find_element(By.ID, "confidence").text
    assert sure.startswith(f"Probability of the prediction: {chances[0] / 100:.2f}") and "right 75% of the time" in sure
    assert "chance is 25%" in sure
    first.send_keys(Keys.ARROW_DOWN)  # the keyboard moves to the next option and shows its evidence
    second = browser.find_elements(By.CSS_SELECTOR, "#ranking li button")[1]
    assert second.get_attribute("aria-pressed") == "true" and browser.switch_to.active_element == second
    assert f"for {second.get_attribute('data-letter')}." in browser.find_element(By.ID, "evidence-title").text
    assert [entry["message"] for entry in browser.get_log("browser") if entry["level"] != "INFO"] == []


@pytest.mark.spawns
def test_results_are_announced_and_focused_with_the_measured_accuracy(browser, url):
    solve(browser, url, PASTED)
    heading = shown(browser)
    assert browser.switch_to.active_element.get_attribute("id") == "prediction"
    assert browser.find_element(By.ID, "announce").get_attribute("aria-live") == "polite"
    assert heading in browser.find_element(By.ID, "announce").get_attribute("textContent")
    accuracy = browser.find_element(By.ID, "accuracy").text
    assert "IR-Custom: 50.0% on MedQA US test (2 questions, 2 books)" in accuracy
    assert "not medical advice" in accuracy and "eval/results/us-test-ir-custom.json" in accuracy


@pytest.mark.spawns
def test_below_the_minimum_confidence_the_page_abstains_with_its_best_guess(browser, url):
    open_page(browser, url)
    browser.find_element(By.ID, "min-confidence").send_keys("0.99")
    paste(browser, PASTED)
    browser.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)
    assert shown(browser) == "No prediction (openqa abstains)"
    assert "openqa abstains: its best guess C has probability" in browser.find_element(By.ID, "verdict").text
    assert "below your minimum 0.99" in browser.find_element(By.ID, "verdict").text
    assert browser.find_element(By.ID, "confidence").text.startswith("Probability of the best guess: ")


@pytest.mark.spawns
def test_a_minimum_confidence_that_is_no_probability_is_said_not_ignored(browser, url):
    """What is typed stays in the field and is said to be wrong: "abc" typed into a number field was
    dropped by Chromium without a word (the question then solved with no minimum)."""
    open_page(browser, url)
    outside = "Minimum confidence must be a probability from 0 to 1 (or empty for none), not "
    for bad, message in (("1.5", outside + "1.5"), ("-0.5", outside + "-0.5"), ("e", 'Minimum confidence "e" is not a number'),
                         ("abc", 'Minimum confidence "abc" is not a number: give a probability from 0 to 1, or leave it empty')):
        field = browser.find_element(By.ID, "min-confidence")
        field.clear()
        field.send_keys(bad)
        assert field.get_attribute("value") == bad
        paste(browser, PASTED)
        browser.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)
        WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "error").is_displayed())
        assert message in browser.find_element(By.ID, "error").text
        browser.execute_script("document.getElementById('error').hidden = true;")


@pytest.mark.spawns
def test_examples_are_real_test_questions_with_their_answer_key(browser, url):
    open_page(browser, url)
    examples = example_buttons(browser)
    rule = browser.find_element(By.ID, "examples-rule").text
    assert "first 5 questions of the MedQA US test split, in file order" in rule and "not chosen by whether" in rule
    assert [e.text.split(":")[0] for e in examples] == ["us-test-1", "us-test-2"]
    examples[1].click()
    shown(browser)
    verdict = browser.find_element(By.ID, "verdict").text
    assert verdict.startswith("Answer key (us-test-2): A. Aspirin.")
    predicted = browser.find_element(By.ID, "prediction").text
    assert ("matches it" in verdict) == predicted.startswith("Prediction: A.")
    keyed = next(r for r in ranking(browser) if r["letter"] == "A")
    assert "correct answer" in keyed["badges"]


@pytest.mark.spawns
def test_a_question_typed_over_an_example_clears_its_answer_key_and_language(browser, url):
    """The example's key and language belong to it: typing another question over it puts back what
    was chosen before (the key none, the language auto), and the page says so."""
    open_page(browser, url)
    example_buttons(browser)[1].click()
    shown(browser)
    value = lambda field: browser.execute_script(f"return document.getElementById('{field}').value")  # noqa: E731
    assert (value("key"), value("lang")) == ("A", "en")
    browser.find_element(By.ID, "text").send_keys(" And which antibiotic?")
    assert (value("key"), value("lang")) == ("", "auto")
    assert browser.find_element(By.ID, "status").text == "The text is no longer example us-test-2: its answer key and language were cleared."


@pytest.mark.spawns
def test_a_given_correct_answer_is_marked_and_judged(browser, url):
    solve(browser, url, PASTED, key="A")
    shown(browser)
    assert browser.find_element(By.ID, "verdict").text == "Correct answer (given): A. Gentamicin. The prediction does not match it."
    assert [r["letter"] for r in ranking(browser) if "correct answer" in r["badges"]] == ["A"]


@pytest.mark.spawns
def test_tied_options_are_shown_as_tied(browser, url):
    solve(browser, url, "Which drug blocks cell wall synthesis?\nA: Aspirin\nB: Ceftriaxone\nC: Ceftriaxone")
    assert "tied with" in shown(browser)
    rows = ranking(browser)
    assert [r["rank"] for r in rows[:2]] == ["=1", "=1"] and all("tied best" in r["badges"] for r in rows[:2])
    assert rows[0]["score"] == rows[1]["score"] and {rows[0]["letter"], rows[1]["letter"]} == {"B", "C"}


@pytest.mark.spawns
def test_pmi_explains_options_without_evidence(browser, url):
    solve(browser, url, "Which drug blocks cell wall synthesis?\nA: Ceftriaxone\nB: Zyxqvor", method="pmi")
    shown(browser)
    row = next(r for r in ranking(browser) if r["letter"] == "B")
    assert row["score"].endswith("no evidence") and row["rank"] == "–"  # "46% · no evidence": its probability still shows
    browser.find_elements(By.CSS_SELECTOR, "#ranking li button")[-1].click()
    assert "its PMI is undefined" in browser.find_element(By.ID, "evidence-note").text


@pytest.mark.spawns
def test_long_options_wrap(browser, url):
    solve(browser, url, "Which drug blocks cell wall synthesis?\nA: Ceftriaxone" + "x" * 400 + "\nB: Aspirin " * 1)
    shown(browser)
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.spawns
def test_ctrl_enter_cannot_bypass_a_disabled_solve_and_the_page_shows_it_is_busy(browser, url, monkeypatch):
    started, gate = Started(), threading.Event()
    gated_scoring(monkeypatch, started, gate, only="SLOW")
    try:
        solve(browser, url, "SLOW: which drug blocks cell wall synthesis?\nA: Aspirin\nB: Ceftriaxone")
        WebDriverWait(browser, WAIT).until(lambda b: not b.find_element(By.ID, "solve").is_enabled())
        assert browser.find_element(By.ID, "ask").get_attribute("aria-busy") == "true"
        assert browser.find_element(By.ID, "status").text.startswith("Solving with ir-custom (en)")
        browser.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)
    finally:
        gate.set()
    shown(browser)
    answers_read(browser, 1)
    assert len(started.names) == 1 and browser.execute_script("return window.answersRead") == 1
    assert browser.find_element(By.ID, "status").text == ""


@pytest.mark.spawns
def test_a_late_reply_never_replaces_a_newer_one(browser, url, monkeypatch):
    started, gate = Started(), threading.Event()
    gated_scoring(monkeypatch, started, gate, only="SLOW")
    try:
        solve(browser, url, "SLOW: which drug blocks cell wall synthesis?\nA: Aspirin\nB: Ceftriaxone")
        WebDriverWait(browser, WAIT).until(lambda b: not b.find_element(By.ID, "solve").is_enabled())
        example_buttons(browser)[0].click()  # a newer request while the first is out
        WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "verdict").text.startswith("Answer key (us-test-1)"))
    finally:
        gate.set()  # the slow reply arrives now, and must be dropped
    answers_read(browser, 2)
    assert browser.find_element(By.ID, "prediction").text.startswith("Prediction: C. Ceftriaxone")
    assert browser.find_element(By.ID, "verdict").text.startswith("Answer key (us-test-1)")


@pytest.mark.spawns
def test_an_error_clears_the_old_result_and_speaks_web(browser, url):
    solve(browser, url, PASTED)
    shown(browser)
    paste(browser, "Which drug?\nA: Aspirin")
    browser.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)
    error = WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "error").text)
    assert error == "Give at least two options, one per line as 'A: text'" and "--" not in error
    assert not browser.find_element(By.ID, "result").is_displayed()


@pytest.mark.spawns
def test_copy_json_and_keyboard_help(browser, url):
    solve(browser, url, PASTED)
    shown(browser)
    browser.find_element(By.ID, "copy").click()
    WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "copied").text)
    assert browser.find_element(By.ID, "copied").text == "Copied."
    browser.find_element(By.TAG_NAME, "body").send_keys("?")
    keys = browser.find_element(By.ID, "keys")
    assert keys.is_displayed() and "Ctrl+Enter" in keys.text.replace(" ", "")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    assert not keys.is_displayed()


#: WCAG's relative luminance of an rgb() colour, and the parts of a computed colour.
LUMINANCE = """
function lum(rgb) { const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b; }
function rgba(text) { return text.match(/[\\d.]+/g).map(Number); }
"""
CONTRAST = LUMINANCE + """
function background(node) { for (; node; node = node.parentElement) { const c = rgba(getComputedStyle(node).backgroundColor);
  if (c.length < 4 || c[3] > 0.5) return c.slice(0, 3); } return rgba(getComputedStyle(document.body).backgroundColor).slice(0, 3); }
const worst = [];
for (const node of document.querySelectorAll('body *')) {
  if (!node.offsetParent && node.tagName !== 'BODY') continue;
  if (![...node.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
  const fg = rgba(getComputedStyle(node).color).slice(0, 3), bg = background(node);
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  worst.push([(hi + 0.05) / (lo + 0.05), node.tagName + '#' + node.id + '.' + node.className]);
}
return worst.sort((a, b) => a[0] - b[0]).slice(0, 3);
"""


@pytest.mark.spawns
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_contrast_is_at_least_4_5_to_1(browser, url, scheme):
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        solve(browser, url, "Which drug blocks cell wall synthesis?\nA: Aspirin\nB: Ceftriaxone\nC: Ceftriaxone", key="A")
        shown(browser)
        browser.find_element(By.TAG_NAME, "body").send_keys("?")
        worst = browser.execute_script(CONTRAST)
        assert worst[0][0] >= 4.5, worst
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


#: The contrast of each score bar's fill with its track (the bar's length is what it shows).
BAR_CONTRAST = LUMINANCE + """
return [...document.querySelectorAll('#ranking .fill')].map(fill => {
  const [a, b] = [fill, fill.parentElement].map(node => lum(rgba(getComputedStyle(node).backgroundColor).slice(0, 3)));
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
});
"""


@pytest.mark.spawns
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_score_bars_stand_out_from_their_track_at_4_5_to_1(browser, url, scheme):
    """The fill was 2.09:1 on its track in the light scheme."""
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        solve(browser, url, PASTED)
        shown(browser)
        ratios = browser.execute_script(BAR_CONTRAST)
        assert len(ratios) == 4 and min(ratios) >= 4.5, ratios
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


#: Each text node holding Chinese characters (its element and first characters), and the language (lang) of the
#: nearest element that names one.
CHINESE_TEXT = """
const found = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  if (!/[\u3400-\u9fff]/.test(node.textContent)) continue;
  const owner = node.parentElement.closest('[lang]');
  found.push([node.parentElement.tagName + '#' + node.parentElement.id + ': ' + node.textContent.slice(0, 20), owner.getAttribute('lang')]);
}
return found;
"""


@pytest.mark.spawns
def test_chinese_text_is_marked_as_chinese(browser, url):
    """The question box, the prediction, the options, the verdict's answer and the evidence of a Chinese
    question carry lang="zh" (the whole page was English to a screen reader or a font chooser)."""
    solve(browser, url, ZH_BLOCK, key="B")
    assert "头孢曲松" in shown(browser)
    found = browser.execute_script(CHINESE_TEXT)
    places = browser.execute_script("return [...document.querySelectorAll('[lang=zh]')].map(e => e.closest('[id]').id)")
    assert found and [text for text, lang in found if lang != "zh"] == [], found
    assert {"prediction", "verdict", "ranking", "evidence-title", "evidence"} <= set(places), places
    assert browser.find_element(By.ID, "text").get_attribute("lang") == "zh"


@pytest.mark.spawns
def test_the_page_fits_a_phone(browser, url):
    browser.set_window_size(390, 844)
    try:
        solve(browser, url, PASTED)
        WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#evidence mark"))
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        browser.set_window_size(1000, 1100)


@pytest.mark.spawns
def test_the_api_docs_render_without_a_network(browser, url):
    browser.get(url + "/docs")
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".opblock"))
    paths = {e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert {"/v1/answer", "/v1/parse", "/v1/methods", "/v1/health", "/v1/examples"} <= paths


@pytest.mark.spawns
def test_an_llm_answer_shows_the_model_reply_and_its_probabilities(browser, url):
    solve(browser, url, PASTED, method="llm")
    assert shown(browser).startswith("Prediction: ")
    reply = browser.find_element(By.ID, "reply")
    assert reply.is_displayed() and reply.text.startswith("Model reply: ") and "No paragraphs were shown" in reply.text
    assert "each option's probability" in browser.find_element(By.ID, "bars").text
    assert "uncalibrated (temperature 1)" in browser.find_element(By.ID, "confidence").text  # no tune for the tiny model
    assert "at temperature 1 (no temperature was fitted" in browser.find_element(By.ID, "bars").text  # nor a fitted one claimed
    solve(browser, url, PASTED, method="ir-custom")
    shown(browser)
    assert not browser.find_element(By.ID, "reply").is_displayed()
    assert "a temperature fitted on the exam's dev split" in browser.find_element(By.ID, "bars").text


@pytest.mark.spawns
def test_settings_that_are_objects_and_a_solved_questions_options_read_as_words(browser, url):
    """An ensemble's weights and a bank's sources are shown key by key (never ``[object Object]``),
    and a solved question's options one per line."""
    open_page(browser, url)
    line = browser.execute_script("""return settingsLine({weights: {"ir-custom": 0.61234, pmi: 0.25},
        bank_sources: [{dataset: "us", split: "dev", questions: 1272}, {file: "course.jsonl", questions: 3}],
        top_n: 3, sources: {weights: "shipped with openqa", bank_sources: "--bank", top_n: "default"}})""")
    assert "[object Object]" not in line
    assert line == ("weights (ir-custom 0.6123, pmi 0.25) (shipped with openqa); "
                    "bank-sources (dataset us, split dev, questions 1272), (file course.jsonl, questions 3) (--bank); top-n 3 (default)")
    options = browser.execute_script("""return [...solvedView({qid: "us-dev-1", similarity: 0.8, question: "Q?",
        options: {A: "Disclose", B: "Refuse"}, answer_idx: "A", answer: "Disclose"}, "en").querySelectorAll("li")]
        .map((li) => li.textContent)""")
    assert options == ["A. Disclose", "B. Refuse"]


def edit_while_solving(browser, url, monkeypatch) -> threading.Event:
    """Solve a slow question, then paste another in its place (as a paste does, with an input event)
    while it is out: the gate that releases the slow question's reply."""
    started, gate = Started(), threading.Event()
    gated_scoring(monkeypatch, started, gate, only="SLOW")
    solve(browser, url, "SLOW: which drug blocks cell wall synthesis?\nA: Aspirin\nB: Ceftriaxone")
    WebDriverWait(browser, WAIT).until(lambda b: not b.find_element(By.ID, "solve").is_enabled())
    paste(browser, "Which drug blocks cell wall synthesis?\nA: Ceftriaxone\nB: Aspirin")
    browser.execute_script("document.getElementById('text').dispatchEvent(new Event('input', {bubbles: true}))")
    return gate


@pytest.mark.spawns
def test_a_question_edited_while_solved_is_solved_again_and_shown_alone(browser, url, monkeypatch):
    gate = edit_while_solving(browser, url, monkeypatch)
    try:
        assert browser.find_element(By.ID, "solve").is_enabled()  # the new text may be solved at once
        browser.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)
        assert shown(browser) == "Prediction: A. Ceftriaxone"
    finally:
        gate.set()  # the first question's reply arrives now, and must be dropped
    answers_read(browser, 2)
    assert browser.find_element(By.ID, "prediction").text == "Prediction: A. Ceftriaxone"
    assert browser.find_element(By.ID, "status").text == ""


@pytest.mark.spawns
def test_a_reply_to_a_question_edited_since_says_so(browser, url, monkeypatch):
    edit_while_solving(browser, url, monkeypatch).set()
    assert shown(browser) == "Prediction: B. Ceftriaxone"  # not solved again: the reply is the old text's, and says so
    assert "it has been edited since: Solve again" in browser.find_element(By.ID, "status").text
    assert "stale" in browser.find_element(By.ID, "result").get_attribute("class")
