"""The documentation's pictures of ``openqa serve``: starts ``openqa serve --lang en --results
eval/results`` on a free loopback port over your indexes and data folder (``OPENQA_INDEXES``,
``OPENQA_DATA``), opens a page in headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by selenium) and saves a screenshot: the answer page solving the first example question (the
first question of the MedQA US test split), or the results page comparing the US test runs of
IR-Custom and the ensemble and showing the ensemble's confidently wrong answers.

    python scripts/maintenance/screenshot_serve.py                      # writes docs/serve.png
    python scripts/maintenance/screenshot_serve.py --page results       # writes docs/results.png
    python scripts/maintenance/screenshot_serve.py --example 3 --output /tmp/page.png
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from benchmarks.bench_serve import OPENQA, free_port, wait_until_up  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the page may take to show the answer.
WAIT = 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", choices=("answer", "results"), default="answer", help="which page (default: answer)")
    parser.add_argument("--output", type=Path, help="PNG to write (default: docs/serve.png, or docs/results.png)")
    parser.add_argument("--example", type=int, default=1, help="which example question to solve (default: 1)")
    parser.add_argument("--size", default="1100,1900", help="window width,height in pixels (default: 1100,1900)")
    args = parser.parse_args()
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    output = args.output or ROOT / "docs" / ("serve.png" if args.page == "answer" else "results.png")
    port = free_port()
    server = subprocess.Popen([OPENQA, "serve", "--lang", "en", "--port", str(port), "--results", str(ROOT / "eval" / "results")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_up(port, server)
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", f"--window-size={args.size}", "--hide-scrollbars"):
            options.add_argument(flag)
        browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
        try:
            if args.page == "answer":
                browser.get(f"http://127.0.0.1:{port}/")
                WebDriverWait(browser, WAIT).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".example")) >= args.example)
                browser.find_elements(By.CSS_SELECTOR, ".example")[args.example - 1].click()
                WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "verdict").text)
                browser.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")
            else:
                results_page(browser, port)
                browser.execute_script("document.activeElement.blur(); document.getElementById('comparison').scrollIntoView();")
            output.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(output))
        finally:
            browser.quit()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    print(f"wrote {output}")


def results_page(browser: webdriver.Chrome, port: int,
                 runs: tuple[str, ...] = ("us-test-ir-custom.json", "us-test-ensemble.json")) -> None:
    """The results page filtered to the US test runs, ``runs`` compared (their table and charts), the
    last one opened beside the first, showing the questions only it gets right."""
    browser.get(f"http://127.0.0.1:{port}/results")
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#runs tbody tr"))
    browser.find_element(By.ID, "filter").send_keys("us-test")
    for name in runs:
        browser.find_element(By.CSS_SELECTOR, f"tr[data-run='{name}'] .tick").click()
    browser.find_element(By.ID, "compare").click()
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#comparison-charts polyline"))
    browser.find_element(By.CSS_SELECTOR, f"tr[data-run='{runs[-1]}'] a.open-run").click()
    WebDriverWait(browser, WAIT).until(lambda b: "questions" in b.find_element(By.ID, "run-count").text)
    Select(browser.find_element(By.ID, "beside")).select_by_value(runs[0])
    WebDriverWait(browser, WAIT).until(lambda b: "also in" in b.find_element(By.ID, "run-count").text)
    Select(browser.find_element(By.ID, "which")).select_by_value("only-this")

if __name__ == "__main__":
    main()
