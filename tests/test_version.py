"""``openqa --version`` names the installed version, the one records carry."""

from __future__ import annotations

import pytest

from openqa import __version__
from openqa.cli import main
from openqa.version import version_record


def test_version_flag_prints_the_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"openqa {__version__}"
    assert version_record()["openqa_version"] == __version__
