"""The ``kafkalog`` command: one sub-command per job, Kafka's vocabulary, stable exit codes.

Exit codes on every command: 0 clean, 1 data problems found, 2 usage error, 3 I/O error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import EXIT_OK
from .arguments import add_command

# Command name -> module of this package. Only the module of the command being run is imported, so
# `kafkalog dump` does not pay for the server's asyncio or the export's Parquet writer at start-up.
# Each module declares its help texts, its options and its run (see arguments.add_command).
COMMANDS: dict[str, str] = {
    "dump": "dump",
    "verify": "verify",
    "serve": "serve",
    "produce": "produce",
    "consume": "consume",
    "export": "export",
    "recover": "recover",
    "rebuild-index": "rebuild_index",
    "compact": "compact",
    "retention": "retention",
    "stats": "stats",
    "transactions": "transactions",
    "make-bootable": "make_bootable",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser for every command, or, with ``only``, for that one command alone."""
    parser = argparse.ArgumentParser(
        prog="kafkalog",
        description="Read, check and write Apache Kafka log files without a broker.",
        epilog="Run 'kafkalog COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"kafkalog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, module in COMMANDS.items():
        if only is None or name == only:
            add_command(commands, name, importlib.import_module(f".{module}", __package__))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's own usage, not the top level's, names what it takes
        _command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return args.run(args)
    except BrokenPipeError:
        # The reader of our output went away (`kafkalog dump ... | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(command, parser)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The command named by ``argv`` if it is one of ours (else None: build them all for help)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


if __name__ == "__main__":
    sys.exit(main())
