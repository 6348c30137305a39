"""The ``kafkalog`` command: one sub-command per job, Kafka's vocabulary, stable exit codes.

Exit codes on every command: 0 clean, 1 data problems found, 2 usage error, 3 I/O error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from . import (
    compact,
    consume,
    dump,
    export,
    produce,
    rebuild_index,
    recover,
    retention,
    serve,
    stats,
    transactions,
    verify,
)

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_IO = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalog",
        description="Read, check and write Apache Kafka log files without a broker.",
        epilog="Run 'kafkalog COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"kafkalog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    dump.add_parser(commands)
    verify.add_parser(commands)
    serve.add_parser(commands)
    produce.add_parser(commands)
    consume.add_parser(commands)
    export.add_parser(commands)
    recover.add_parser(commands)
    rebuild_index.add_parser(commands)
    compact.add_parser(commands)
    retention.add_parser(commands)
    stats.add_parser(commands)
    transactions.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:
        # The reader of our output went away (`kafkalog dump ... | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
