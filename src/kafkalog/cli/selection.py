"""Record-selection options shared by ``consume`` and ``export``.

Both read a data directory as a consumer does; their data directories, topic and partition
choice, isolation level, data-loss policy and key/value decoders are one vocabulary, defined
here once so that the two commands cannot drift apart.
"""

from __future__ import annotations

import argparse

from .value_decoders import DECODER_NAMES


def add_data_dirs(parser: argparse.ArgumentParser) -> None:
    """The positional data directories (a broker's log.dirs, or one partition directory)."""
    parser.add_argument(
        "data_dirs", nargs="+", metavar="DATA_DIR",
        help="a data directory (several: one broker's log.dirs) or a partition directory",
    )  # fmt: skip


def add_topic_choice(
    group: argparse._ArgumentGroup, *, topic_help: str, partition_help: str
) -> None:
    """``--topic``, ``--include`` and ``--partition``: which partitions are read."""
    group.add_argument("--topic", "-t", action="append", metavar="TOPIC", help=topic_help)
    group.add_argument(
        "--include", metavar="REGEX",
        help="topics whose whole name matches (Kafka's internal topics are left out, as a "
        "consumer's pattern leaves them out: name them with --topic)",
    )  # fmt: skip
    group.add_argument(
        "--partition", "-p", action="append", type=int, metavar="N", help=partition_help
    )


def add_read_policy(group: argparse._ArgumentGroup, *, data_loss_help: str) -> None:
    """``--isolation-level`` and ``--no-fail-on-data-loss``: Kafka's consumer settings."""
    group.add_argument(
        "--isolation-level", choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed stops at the last stable offset and drops aborted records",
    )  # fmt: skip
    group.add_argument(
        "--no-fail-on-data-loss", dest="fail_on_data_loss", action="store_false",
        help=data_loss_help,
    )  # fmt: skip
    add_remote_storage(group, effect="those offsets are read from there",
                       without="they are data loss")  # fmt: skip


def add_remote_storage(group: argparse._ActionsContainer, *, effect: str, without: str) -> None:
    """``--remote-storage DIR``: Kafka's LocalTieredStorage directory, for partitions whose old
    segments tiered storage moved there; ``effect`` says what the command does with them,
    ``without`` what happens to them when it is not given."""
    group.add_argument(
        "--remote-storage", metavar="DIR",
        help="where a broker with tiered storage moved old segments (Kafka's LocalTieredStorage "
        f"directory, its rsm.config.dir): {effect} (docs/tiered-storage.md); without it "
        f"{without}",
    )  # fmt: skip


def read_policy_options(args: argparse.Namespace) -> dict[str, str]:
    """The reader options :func:`add_read_policy`'s flags give beyond the keyword arguments."""
    return {"remoteStorage": args.remote_storage} if args.remote_storage else {}


def add_decoders(group: argparse._ArgumentGroup, *, help_template: str) -> None:
    """``--key-decoder`` and ``--value-decoder``; ``help_template`` is formatted with ``what``
    (key or value) and ``names`` (the decoders' names)."""
    names = ", ".join(DECODER_NAMES)
    for what in ("key", "value"):
        group.add_argument(
            f"--{what}-decoder", choices=DECODER_NAMES, metavar="NAME",
            help=help_template.format(what=what, names=names),
        )  # fmt: skip
