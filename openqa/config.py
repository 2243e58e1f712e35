"""Where things live: settings from flags, then environment variables, then defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from openqa.errors import OpenQAError

#: Environment variables a user can set instead of passing flags.
ENV_DATA = "OPENQA_DATA"
ENV_INDEXES = "OPENQA_INDEXES"
ENV_MODELS = "OPENQA_MODELS"
ENV_ES_URL = "OPENQA_ES_URL"

#: Where ``eval`` writes reports and ``tune`` writes the settings it chose.
RESULTS_DIR = Path("eval/results")
TUNED_DIR = Path("eval/tuned")


@dataclass(frozen=True)
class Settings:
    """Resolved locations of data, indexes and models."""

    data_dir: Path | None
    index_dir: Path
    models_dir: Path | None
    es_url: str | None = None

    @classmethod
    def resolve(
        cls,
        data_dir: str | os.PathLike | None = None,
        index_dir: str | os.PathLike | None = None,
        models_dir: str | os.PathLike | None = None,
        es_url: str | None = None,
    ) -> "Settings":
        """Take each setting from its flag, else its environment variable, else the default."""

        def pick(flag, env: str, default=None):
            value = flag if flag is not None else os.environ.get(env) or default
            return Path(value) if value is not None else None

        return cls(
            data_dir=pick(data_dir, ENV_DATA),
            index_dir=pick(index_dir, ENV_INDEXES, "indexes"),
            models_dir=pick(models_dir, ENV_MODELS),
            es_url=es_url or os.environ.get(ENV_ES_URL) or None,
        )

    def require_data_dir(self) -> Path:
        """The MedQA ``data_clean`` folder, or a one-line error saying how to set it."""
        if self.data_dir is None:
            raise OpenQAError(
                f"no MedQA data folder: pass --data-dir or set {ENV_DATA} "
                "(e.g. ../shared/medqa/data_clean)"
            )
        if not self.data_dir.is_dir():
            raise OpenQAError(f"MedQA data folder not found: {self.data_dir}")
        return self.data_dir
