"""Remake every screenshot the documentation shows: the pages of ``openqa serve``, taken in headless
Chromium from the running server.

    docs/serve.png    the answer page solving the first example question (the first question of
                      the MedQA US test split), with IR-Custom over the English textbooks
    docs/results.png  the results page comparing the US test runs of IR-Custom and the ensemble,
                      the ensemble's questions shown beside IR-Custom's: those only it gets right

It starts ``openqa serve --lang en --results <eval/results as committed>`` (this checkout's openqa,
with the shipped settings only) on a free loopback port, opens each page in headless Chromium
driven by selenium, and saves it as a 256-colour PNG (a screenshot of text loses nothing by it,
and is a third of the size).

What it needs, beside a clone of this repository (only its committed files are read):
  - Debian's chromium and chromium-driver (apt-get install chromium chromium-driver), selenium
    and Pillow (both in the development install: bash scripts/install_dev.sh);
  - the MedQA data folder (OPENQA_DATA: the data_clean folder), whose English index the server
    reads (OPENQA_INDEXES, default ./indexes; built there first when missing, as openqa index
    --lang en does);
  - nothing else: the results page reads the records and the compact predictions
    (.predictions.jsonl.gz) committed under eval/results, copied from HEAD (git archive), and a
    tuning of your own is not used, so a checkout with more runs, uncommitted predictions or its
    own settings gives the pictures a clean clone gives.

    python scripts/maintenance/screenshot_serve.py                    # both pictures, into docs/
    python scripts/maintenance/screenshot_serve.py --page results     # docs/results.png alone
    python scripts/maintenance/screenshot_serve.py --page answer --example 3 --output /tmp/page.png
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchmarks.bench_serve import free_port, wait_until_up  # noqa: E402

if TYPE_CHECKING:  # selenium and Pillow are imported where used: --help says what is missing without them
    from selenium import webdriver

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a page may take to show what is pictured.
WAIT = 60
#: Colours of a saved picture (a palette PNG).
COLOURS = 256


def answer_page(browser: webdriver.Chrome, url: str, example: int) -> None:
    """The answer page with example question ``example`` solved, from its top."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{url}/")
    WebDriverWait(browser, WAIT).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".example")) >= example)
    browser.find_elements(By.CSS_SELECTOR, ".example")[example - 1].click()
    WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "verdict").text)
    browser.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")


def results_page(browser: webdriver.Chrome, url: str, example: int,
                 runs: tuple[str, ...] = ("runs/us/us-test-ir-custom.json", "runs/us/us-test-ensemble.json")) -> None:
    """The results page filtered to the US test runs, ``runs`` (named by folder and name, as the page
    names them) compared (their table and charts), the last one opened beside the first, showing the
    questions only it gets right; from the comparison (``example`` is the answer page's: this page has none)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(f"{url}/results")
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
    browser.execute_script("document.activeElement.blur(); document.getElementById('comparison').scrollIntoView();")


@dataclass(frozen=True)
class Picture:
    """A screenshot the documentation shows: its file (in the repository), the browser window it is
    taken in (width, height: the picture is the page's part that fits), and how the page is brought
    to what it shows (``show(browser, server_url, example)``)."""

    output: str
    window: tuple[int, int]
    show: Callable[[webdriver.Chrome, str, int], None]


#: Every screenshot of the documentation, by page.
PICTURES = {
    "answer": Picture("docs/serve.png", (1100, 1900), answer_page),
    "results": Picture("docs/results.png", (1400, 1500), results_page),
}


def committed_results(folder: Path) -> Path:
    """``eval/results`` as HEAD has it (what a clean clone holds), unpacked under ``folder``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD", "eval/results"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"screenshot_serve: cannot read eval/results from git ({archive.stderr.decode(errors='replace').strip()}): "
                         "run it in a clone of the repository")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder / "eval" / "results"


def save(png: bytes, output: Path) -> int:
    """``png`` as a ``COLOURS``-colour PNG at ``output`` (no dithering: flat text and charts stay
    exact); its size in bytes."""
    from PIL import Image

    picture = Image.open(io.BytesIO(png)).convert("RGB").quantize(COLOURS, Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    output.parent.mkdir(parents=True, exist_ok=True)
    picture.save(output, optimize=True)
    return output.stat().st_size


def browser_for(chromium: str, driver: str) -> webdriver.Chrome:
    """Headless Chromium without scroll bars, background traffic or a sandbox (as root in a container)."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-extensions", "--no-first-run", "--hide-scrollbars"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", choices=sorted(PICTURES), action="append",
                        help="a page to picture (repeatable; default: every one)")
    parser.add_argument("--output", type=Path, help="PNG to write, with one --page (default: the picture's file under docs/)")
    parser.add_argument("--example", type=int, default=1, help="which example question the answer page solves (default: 1)")
    args = parser.parse_args()
    pages = args.page or list(PICTURES)
    if args.output and len(pages) != 1:
        raise SystemExit("screenshot_serve: --output names one picture: give one --page")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        raise SystemExit("screenshot_serve: needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    missing = [name for name, module in (("selenium", "selenium"), ("Pillow", "PIL")) if importlib.util.find_spec(module) is None]
    if missing:
        raise SystemExit(f"screenshot_serve: needs {' and '.join(missing)} (the development install: bash scripts/install_dev.sh)")
    with tempfile.TemporaryDirectory(prefix="screenshot-serve-") as tmp:
        results, log, untuned = committed_results(Path(tmp)), Path(tmp) / "serve.log", Path(tmp) / "no-tuning"
        untuned.mkdir()  # no settings of the user's own: those shipped with openqa
        port = free_port()
        # this checkout's openqa, whatever else is installed
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
        with open(log, "wb") as errors:
            server = subprocess.Popen([sys.executable, "-m", "openqa.cli", "serve", "--lang", "en", "--port", str(port),
                                       "--results", str(results), "--settings-dir", str(untuned)],
                                      stdout=subprocess.DEVNULL, stderr=errors, env=env)
        try:
            try:
                wait_until_up(port, server)
            except SystemExit as exc:  # the server's own last line says why (no index, no data)
                said = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
                raise SystemExit(f"screenshot_serve: {exc}{': ' + said[-1] if said else ''}") from None
            browser = browser_for(chromium, driver)
            try:
                for page in pages:
                    picture = PICTURES[page]
                    browser.set_window_size(*picture.window)
                    picture.show(browser, f"http://127.0.0.1:{port}", args.example)
                    output = args.output or ROOT / picture.output
                    size = save(browser.get_screenshot_as_png(), output)
                    print(f"wrote {output} ({size / 1024:.0f} KB)")
            finally:
                browser.quit()
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
