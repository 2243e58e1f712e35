"""Shared pytest fixtures."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def medqa_dir() -> Path:
    """The shared MedQA data_clean folder (OPENQA_DATA, else ../shared/medqa/data_clean); skips when absent."""
    env = os.environ.get("OPENQA_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "medqa" / "data_clean"
    if not path.is_dir():
        pytest.skip(f"MedQA data not found at {path} (set OPENQA_DATA)")
    return path
