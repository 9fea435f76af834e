"""User errors: bad config, data or input files. They print as one line, without a traceback."""
from __future__ import annotations


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""

    def __init__(self, message: str, key: str | None = None, problem: str | None = None):
        super().__init__(message)
        self.key = key  # the key, relative to its config group
        self.problem = problem or message  # the message without the key


class InvalidCombination(ConfigError):
    """Settings that are each valid but cannot go together (a sweep lists these as 'invalid')."""


class UserError(Exception):
    """A problem with what the user gave: printed as one line, exit status 2."""


# What a command-line entry point reports as one line (exit 2) instead of a traceback.
USER_ERRORS = (UserError, ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
               PermissionError)


def one_line(err: BaseException) -> str:
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or type(err).__name__
