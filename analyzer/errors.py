"""Exit codes and the errors the command line turns into clear messages."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of ``analyze`` (stable: scripts test them)."""

    OK = 0
    FAILED = 1  # an unexpected failure
    USAGE = 2  # bad arguments (typer/click's own code)
    NO_INPUT = 3  # no such file, or no log records in the inputs
    BAD_INPUT = 4  # malformed input under --strict
    DATABASE = 5  # the database cannot be opened or is not ours
    UPSTREAM = 6  # a remote service (Prometheus, replay endpoint) failed
    THRESHOLD = 7  # a --fail-on threshold was crossed (the summary was still printed)
    SKIPPED = 8  # --strict: the run completed, but some input files were skipped


class AnalyzerError(Exception):
    """An error with a message meant for the operator and an exit code."""

    exit_code: ExitCode = ExitCode.FAILED

    def __init__(self, message: str, exit_code: ExitCode | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(AnalyzerError):
    """Inputs that cannot be read: missing files, not a log, malformed under --strict."""

    exit_code = ExitCode.NO_INPUT


class DatabaseError(AnalyzerError):
    """The database file cannot be opened, is locked, or is not an analyzer database."""

    exit_code = ExitCode.DATABASE
