"""How a command's failures become one line on stderr and an exit status (``kafkalog.errors``'
EXIT_*): 0 clean, 1 data problems, 2 usage error, 3 I/O error or a locked data directory.

Every line starts ``kafkalog COMMAND:``, and an I/O error names its file and the system's words,
whichever command meets it. :func:`guarded` is the mapping of the commands that walk data
directories; the commands that read and write records add the dataset's options, errors and
warnings to it (:mod:`.data_errors`).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from ..errors import (
    EXIT_IO,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    KafkalogError,
    RemoteStorageError,
    UsageError,
)

__all__ = ["UsageError", "guarded", "os_error_text", "report"]

Body = Callable[[argparse.Namespace], int]


def report(command: str, message: object) -> None:
    """``kafkalog COMMAND: MESSAGE`` on stderr (flushed: it may interleave with stdout)."""
    print(f"kafkalog {command}: {message}", file=sys.stderr, flush=True)


def os_error_text(error: OSError, path: object = None) -> str:
    """``FILE: what the system says``: the error's file, else ``path``, else no file. A failed
    read of object storage says its URL and byte position itself."""
    if isinstance(error, RemoteStorageError):
        return str(error)
    where = error.filename or path
    return f"{where}: {error.strerror or error}" if where else f"{error.strerror or error}"


def guarded(command: str) -> Callable[[Body], Body]:
    """A command's ``run``, decorated: expected failures become a message on stderr and an exit
    status instead of a traceback."""

    def decorate(body: Body) -> Body:
        @functools.wraps(body)
        def run(args: argparse.Namespace) -> int:
            from ..log.datadir import DataDirLockedError  # the log layer: when a command runs

            try:
                return body(args)
            except BrokenPipeError:
                raise  # the reader of our output went away: main() handles it
            except UsageError as e:
                report(command, e)
                return EXIT_USAGE
            except DataDirLockedError as e:
                report(command, e.message)  # it names the directory
                return EXIT_IO
            except KafkalogError as e:
                report(command, e)
                return EXIT_PROBLEMS
            except OSError as e:
                report(command, os_error_text(e))
                return EXIT_IO

        return run

    return decorate
