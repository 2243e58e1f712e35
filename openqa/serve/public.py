"""What the server says to its clients about itself: settings in the words of the API rather than
the command line's (``in_request_words``), and text with the server's folders and the files it was
given named, never their absolute paths (``Public``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import openqa
from openqa.config import OptionSource
from openqa.workspace import Context

#: How the API names the options a settings source may name (``OptionSource``; the others keep their flag).
REQUEST_FIELDS = {"top_n": "request top_n", "lang": "lang"}


def in_request_words(value: Any) -> Any:
    """Settings (nested, as a record holds them) with each source that names an option rendered as
    the API names it (``REQUEST_FIELDS``: ``request top_n`` where the command line says ``--top-n``)."""
    if isinstance(value, dict):
        return {key: in_request_words(item) for key, item in value.items()}
    if isinstance(value, list):
        return [in_request_words(item) for item in value]
    if isinstance(value, OptionSource):
        return value.render(REQUEST_FIELDS)
    return value


class Public:
    """Text sent to clients with the server's folders named, and the ``files`` it was given (``--bank``,
    ``--model``) by their names alone, never as absolute paths."""

    def __init__(self, ctx: Context, files: Iterable[str | Path] = ()) -> None:
        s = ctx.settings
        folders = [(s.index_dir, "<index folder>"), (s.data_dir, "<data folder>"), (s.settings_dir, "<settings folder>"),
                   (s.models_dir, "<models folder>"), (Path(openqa.__file__).parent, "<openqa package>")]
        folders += [(Path(file).expanduser().absolute(), Path(file).name) for file in files]
        pairs = {str(Path(p).resolve()): label for p, label in folders if p is not None}
        pairs.update({str(p): label for p, label in folders if p is not None and Path(p).is_absolute()})
        self.pairs = sorted(pairs.items(), key=lambda pair: -len(pair[0]))  # longest (innermost) first

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self(item) for item in value]
        if isinstance(value, str):
            for path, label in self.pairs:
                value = value.replace(path, label)
        return value
