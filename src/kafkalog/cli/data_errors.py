"""Exit statuses of the commands that read and write records (produce, consume, export).

The statuses of :mod:`.failures`, with the dataset's errors: 2 for options that cannot work,
1 for data problems (corrupt records, offsets that are gone, input that is not a record), 3 for
files and directories that cannot be read or written (or are locked by another writer); and the
reader's warnings as lines on stderr.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import contextmanager

from ..errors import EXIT_IO, EXIT_PROBLEMS, EXIT_USAGE, KafkalogError
from .failures import os_error_text, report

__all__ = ["exit_status", "guarded", "warnings_to_stderr"]


# The shared reader speaks of the Spark source's options; on the command line they are flags.
_OPTION_WORDS = (
    ("set the option failOnDataLoss to false", "run again with --no-fail-on-data-loss"),
    ("(failOnDataLoss=false)", "(--no-fail-on-data-loss)"),
    ("option remoteStorage", "--remote-storage"),
)


def _cli_words(text: str) -> str:
    for spark, cli in _OPTION_WORDS:
        text = text.replace(spark, cli)
    return text


def exit_status(command: str, error: BaseException) -> int:
    """Report ``error`` on stderr and return its exit status."""
    from ..dataset import OptionError
    from ..log.datadir import DataDirLockedError

    if isinstance(error, OptionError):
        report(command, error)
        return EXIT_USAGE
    if isinstance(error, DataDirLockedError):
        report(command, error)
        return EXIT_IO
    if isinstance(error, (KafkalogError, ValueError)):
        report(command, _cli_words(str(error)))
        return EXIT_PROBLEMS
    if isinstance(error, OSError):
        report(command, os_error_text(error))
        return EXIT_IO
    raise error


@contextmanager
def warnings_to_stderr(command: str):
    """Show warnings (skipped data with failOnDataLoss off, torn tails, ignored options) as one
    line each, once (``consume --follow`` plans again and again over the same torn tail)."""
    seen: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = _cli_words(str(message))
        text = text.removeprefix("kafkalog: ")
        if text in seen:
            return
        seen.add(text)
        report(command, f"warning: {text}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


def guarded(command: str, body: Callable[[], int]) -> int:
    """Run ``body``; expected failures become a message and an exit status."""
    with warnings_to_stderr(command):
        try:
            return body()
        except (KafkalogError, ValueError, OSError) as e:
            if isinstance(e, BrokenPipeError):
                raise
            return exit_status(command, e)
