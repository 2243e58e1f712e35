"""Errors a user can act on: the CLI prints their message on one line and exits non-zero."""


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
