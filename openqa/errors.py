"""Errors a user can act on, all under ``OpenQAError``: the library raises them and never prints;
the CLI prints their message on one line and exits non-zero, the server answers with it."""


class OpenQAError(Exception):
    """A problem with the user's input, data or settings (never a bug)."""


class DataError(OpenQAError):
    """A question or corpus file is missing or malformed; the message names file and line."""


class IndexMismatchError(OpenQAError):
    """An index was built with other settings or from another corpus than the one asked for."""


class IndexMissingError(OpenQAError):
    """No index has been built where one was asked for; the message names the command that builds it."""


class IndexDamagedError(OpenQAError):
    """An index's files differ from what its manifest recorded, or cannot be parsed; rebuild it."""


class MissingExtraError(OpenQAError):
    """A feature needs a package of an extra that is not installed; the message names the extra and
    the ``pip install`` command (``openqa.extras``)."""

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class UsageError(OpenQAError):
    """A call asks for something impossible or contradictory (an unknown name, a negative count)."""
