"""The README's picture of ``openqa serve``: starts ``openqa serve --lang en`` on a free loopback
port over your indexes and data folder (``OPENQA_INDEXES``, ``OPENQA_DATA``), opens the page in
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by selenium), solves the
first example question (the first question of the MedQA US test split) and saves a screenshot.

    python scripts/screenshot_serve.py                      # writes docs/serve.png
    python scripts/screenshot_serve.py --example 3 --output /tmp/page.png
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import OPENQA, free_port, wait_until_up  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Seconds the page may take to show the answer.
WAIT = 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "serve.png", help="PNG to write (default: docs/serve.png)")
    parser.add_argument("--example", type=int, default=1, help="which example question to solve (default: 1)")
    parser.add_argument("--size", default="1100,1900", help="window width,height in pixels (default: 1100,1900)")
    args = parser.parse_args()
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    port = free_port()
    server = subprocess.Popen([OPENQA, "serve", "--lang", "en", "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_until_up(port, server)
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", f"--window-size={args.size}", "--hide-scrollbars"):
            options.add_argument(flag)
        browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
        try:
            browser.get(f"http://127.0.0.1:{port}/")
            WebDriverWait(browser, WAIT).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".example")) >= args.example)
            browser.find_elements(By.CSS_SELECTOR, ".example")[args.example - 1].click()
            WebDriverWait(browser, WAIT).until(lambda b: b.find_element(By.ID, "verdict").text)
            browser.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")
            args.output.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(args.output))
        finally:
            browser.quit()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
