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
