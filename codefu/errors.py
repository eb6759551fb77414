"""Errors that carry a message meant for the user (the CLI prints them without a traceback)."""


class CodefuError(Exception):
    """Bad input or configuration: the message names what is wrong and where."""


class SandboxUnavailable(CodefuError):
    """The sandbox cannot start on this machine; the message says how to fix it."""
