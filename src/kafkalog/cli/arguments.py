"""What every command's command line shares: its parser, its numbers' types and its ``--json``.

Defined once so that ``--help`` pages look alike, a number out of range is a usage error (exit 2)
on every command, and ``--json`` means JSON lines everywhere (see :func:`.output.write_json`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from types import ModuleType

__all__ = ["add_command", "add_json_flag", "bounded_int", "command_parser"]


def command_parser(
    commands: argparse._SubParsersAction,
    name: str,
    *,
    summary: str,
    description: str,
    epilog: str,
) -> argparse.ArgumentParser:
    """A command's parser: ``summary`` in the command list, ``description`` and the ``epilog``
    of examples (its line breaks kept) in its own ``--help``."""
    return commands.add_parser(
        name,
        help=summary,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_command(
    commands: argparse._SubParsersAction, name: str, module: ModuleType
) -> argparse.ArgumentParser:
    """The parser of the command ``module`` declares: its ``SUMMARY`` in the command list, its
    ``DESCRIPTION`` and ``EXAMPLES`` in its ``--help``, ``add_arguments(parser)`` for its options
    and ``run(args)``, which returns the exit status."""
    parser = command_parser(
        commands,
        name,
        summary=module.SUMMARY,
        description=module.DESCRIPTION,
        epilog=module.EXAMPLES,
    )
    module.add_arguments(parser)
    parser.set_defaults(run=module.run)
    return parser


def bounded_int(low: int, high: int = (1 << 63) - 1) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``low..high`` (a Java long by default): a
    value out of range is a usage error (exit 2), not a surprise later."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    return parse


def add_json_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    help: str = "one JSON object per line",
) -> None:
    """``--json``: JSON lines instead of text (``help`` when the command writes one object)."""
    parser.add_argument("--json", action="store_true", help=help)
