"""Where things live: one root of locations, each from its flag, else its environment variable,
else its default; derived folders (the user's tuned settings) follow the index folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, overload

from openqa.arguments import checked_path
from openqa.errors import OpenQAError

#: The method a command uses when none is named (``openqa.methods`` holds them all).
DEFAULT_METHOD = "ir-custom"

#: Environment variables a user can set instead of passing flags.
ENV_DATA = "OPENQA_DATA"
ENV_INDEXES = "OPENQA_INDEXES"
ENV_MODELS = "OPENQA_MODELS"
ENV_ES_URL = "OPENQA_ES_URL"
ENV_SETTINGS = "OPENQA_SETTINGS"
ENV_RESULTS = "OPENQA_RESULTS"

#: Default folders, relative to where the command runs (printed by every command that writes there).
DEFAULT_INDEXES = "indexes"
DEFAULT_RESULTS = "eval/results"
#: The user's own ``openqa tune`` choices live beside the index folder under this name.
TUNED_FOLDER = "tuned"


@dataclass(frozen=True)
class Settings:
    """Resolved locations of data, indexes, models, the user's tuned settings and results."""

    data_dir: Path | None
    index_dir: Path
    models_dir: Path | None
    es_url: str | None = None
    settings_dir: Path = Path(TUNED_FOLDER)
    results_dir: Path = Path(DEFAULT_RESULTS)
    #: Whether ``settings_dir`` was asked for on the command line (flag or environment), not derived
    #: from the index folder: then it must exist (a library caller may name one ``tune`` will make).
    settings_given: bool = False

    @classmethod
    def resolve(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        index_dir: str | os.PathLike[str] | None = None,
        models_dir: str | os.PathLike[str] | None = None,
        es_url: str | None = None,
        settings_dir: str | os.PathLike[str] | None = None,
        results_dir: str | os.PathLike[str] | None = None,
        check_settings: bool = False,
    ) -> "Settings":
        """Take each setting from its flag, else its environment variable, else the default.

        The tuned-settings folder defaults to ``tuned/`` beside the index folder, so it travels
        with the indexes; results default to ``./eval/results``. ``check_settings`` (the command
        line): a settings folder given by flag or environment must exist when read (``tuned_dir``).
        """

        @overload
        def pick(flag: str | os.PathLike[str] | None, env: str, default: str | Path) -> Path: ...
        @overload
        def pick(flag: str | os.PathLike[str] | None, env: str, default: None = None) -> Path | None: ...
        def pick(flag: str | os.PathLike[str] | None, env: str, default: str | Path | None = None) -> Path | None:
            value = flag if flag is not None else os.environ.get(env) or default
            if value is None:
                return None
            # a name the file system cannot keep (over 255 bytes, a lone surrogate) is one line here, not an OSError later
            setting = f"the folder given for ${env}" if flag is not None else f"${env}"
            return Path(checked_path(setting, os.fspath(value)))

        indexes = pick(index_dir, ENV_INDEXES, DEFAULT_INDEXES)
        if indexes.exists() and not indexes.is_dir():
            where = "--index-dir" if index_dir is not None else f"${ENV_INDEXES}" if os.environ.get(ENV_INDEXES) else "the default"
            raise OpenQAError(f"the index folder {indexes} ({where}) is a file, not a folder: name a folder")
        if indexes.is_symlink() and not indexes.exists():
            where = "--index-dir" if index_dir is not None else f"${ENV_INDEXES}" if os.environ.get(ENV_INDEXES) else "the default"
            raise OpenQAError(f"the index folder {indexes} ({where}) is a link to {os.readlink(indexes)}, which is not there: "
                              "make that folder, or name another")
        return cls(
            data_dir=pick(data_dir, ENV_DATA),
            index_dir=indexes,
            models_dir=pick(models_dir, ENV_MODELS),
            es_url=es_url or os.environ.get(ENV_ES_URL) or None,
            settings_dir=pick(settings_dir, ENV_SETTINGS, indexes.parent / TUNED_FOLDER),
            results_dir=pick(results_dir, ENV_RESULTS, DEFAULT_RESULTS),
            settings_given=check_settings and (settings_dir is not None or bool(os.environ.get(ENV_SETTINGS))),
        )

    def tuned_dir(self) -> Path:
        """The folder of the user's ``openqa tune`` choices, to read: one asked for by flag or
        environment must be a folder (else its choices would be silently ignored); the default one
        beside the index folder may be missing (nothing tuned yet)."""
        if self.settings_given and not self.settings_dir.is_dir():
            what = "is not a folder" if self.settings_dir.exists() else "not found"
            raise OpenQAError(f"settings folder {self.settings_dir} {what} (--settings-dir or ${ENV_SETTINGS}): "
                              "give the folder `openqa tune` wrote to")
        return self.settings_dir

    def require_data_dir(self) -> Path:
        """The MedQA ``data_clean`` folder, or a one-line error saying how to set it."""
        if self.data_dir is None:
            raise OpenQAError(
                f"no MedQA data folder: pass --data-dir or set {ENV_DATA} "
                "(the data_clean folder of the MedQA release)"
            )
        if not self.data_dir.is_dir():
            raise OpenQAError(f"MedQA data folder not found: {self.data_dir}")
        return self.data_dir


def flag(option: str) -> str:
    """The command-line flag that gives ``option`` (``top_n``: ``--top-n``)."""
    return "--" + option.replace("_", "-")


class OptionSource(str):
    """The source of a setting the user gave as an option (``top_n``, ``lang``), as a value each
    front end renders in its own words: the command line, and every record it writes, name the
    option by its flag (``--top-n``, ``default for --lang en``); the HTTP API by its request field
    (``render({"top_n": "request top_n"})``).

    It is the ``str`` the command line shows, so records keep their text and JSON; it also knows
    which option it names and the words around it (``before``, ``after``). Every other source
    ("default", a tuned file) is plain text that all front ends show alike. A source built from this
    one with ``+`` or an f-string is plain text again: ``prefixed`` keeps the option."""

    option: str
    before: str
    after: str

    def __new__(cls, option: str, before: str = "", after: str = "") -> "OptionSource":
        made = super().__new__(cls, f"{before}{flag(option)}{after}")
        made.option, made.before, made.after = option, before, after
        return made

    def __reduce__(self) -> tuple[type["OptionSource"], tuple[str, str, str]]:
        """Copied and pickled as the option and words it was made of (not as its text)."""
        return type(self), (self.option, self.before, self.after)

    def render(self, names: Mapping[str, str]) -> str:
        """The source with its option named as ``names`` names it (an option not in ``names``: its flag)."""
        return f"{self.before}{names.get(self.option, flag(self.option))}{self.after}"


def prefixed(text: str, source: str) -> str:
    """``text`` followed by ``source`` (a part's source within a whole's: ``ir-custom: --top-n``),
    still naming its option where ``source`` names one."""
    if isinstance(source, OptionSource):
        return OptionSource(source.option, text + source.before, source.after)
    return text + source


def user_cache_dir(kind: str) -> Path | None:
    """This user's cache folder for what openqa derives once and keeps (``kind``: ``numba``,
    ``tokenizers``): ``$XDG_CACHE_HOME/openqa/KIND`` (``~/.cache/openqa/KIND``), made if missing;
    None where it cannot be made or written. Nothing kept there changes a result: each entry is
    named by what it was derived from."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "openqa" / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None
