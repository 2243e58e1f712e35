"""``python -m openqa.cli``: the ``openqa`` command, as the console script runs it."""

import sys

from openqa.cli import main

sys.exit(main())
