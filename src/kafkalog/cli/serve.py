"""``kafkalog serve DATA_DIR``: a single-node Kafka-compatible broker over a data directory."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from ..errors import KafkalogError

EXAMPLES = """\
examples:
  kafkalog serve ./data                          # clients bootstrap from 127.0.0.1:9092
  kafkalog serve ./data --listen 0.0.0.0:9092 --advertised-host myhost
  kafkalog serve ./data --listen 127.0.0.1:0     # any free port, printed on start
"""


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def add_parser(commands) -> None:
    p = commands.add_parser(
        "serve",
        help="serve a data directory to Kafka clients (single node)",
        description="Run a single-node broker speaking the Kafka protocol over DATA_DIR: "
        "produce, fetch, consumer groups and transactions from any Kafka client.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data_dir", metavar="DATA_DIR", type=Path, nargs="+", help="log directories")
    p.add_argument("--listen", type=_listen, default=("127.0.0.1", 9092), metavar="HOST:PORT")
    p.add_argument("--advertised-host", help="host name given to clients (default: listen host)")
    p.add_argument("--node-id", type=int, default=0)
    p.add_argument("--num-partitions", type=int, default=1, help="for auto-created topics")
    p.add_argument("--no-auto-create-topics", action="store_true")
    p.add_argument("--max-request-bytes", type=int, default=100 * 1024 * 1024)
    p.add_argument("--max-connections", type=int, default=1000)
    p.add_argument("--max-connections-per-ip", type=int, default=1000)
    p.add_argument("--no-sendfile", action="store_true", help="copy fetched records instead")
    p.add_argument(
        "--max-open-files",
        type=int,
        default=None,
        metavar="N",
        help="segment and index files open at once; the least recently used are closed and "
        "reopened on demand (default: half of what the open-files limit leaves)",
    )
    p.add_argument(
        "--offsets-topic-num-partitions",
        type=int,
        default=50,
        metavar="N",
        help="partitions of __consumer_offsets when it is created",
    )
    p.add_argument(
        "--transaction-state-log-num-partitions",
        type=int,
        default=50,
        metavar="N",
        help="partitions of __transaction_state when it is created",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_setting,
        help="a broker setting by Kafka's name (group.*, transaction.*, offsets.*, "
        "log.retention.check.interval.ms, log.initial.task.delay.ms, log.cleaner.enable)",
    )
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..server.app import serve
    from ..server.config import ServerConfig

    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    host, port = args.listen
    config = ServerConfig(
        data_dirs=list(args.data_dir),
        host=host,
        port=port,
        advertised_host=args.advertised_host,
        node_id=args.node_id,
        num_partitions=args.num_partitions,
        auto_create_topics_enable=not args.no_auto_create_topics,
        socket_request_max_bytes=args.max_request_bytes,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        sendfile=not args.no_sendfile,
        max_open_files=args.max_open_files,
        offsets_topic_num_partitions=args.offsets_topic_num_partitions,
        transaction_state_log_num_partitions=args.transaction_state_log_num_partitions,
        extra=dict(args.config),
    )

    def ready(broker) -> None:
        print(f"kafkalog serving {broker.host}:{broker.port}", file=sys.stderr, flush=True)

    from ..log.dir_lock import LOCK_FILE_NAME, DataDirLockedError

    try:
        asyncio.run(serve(config, ready=ready))
    except DataDirLockedError as e:  # another broker or kafkalog process holds the directory
        where = Path(e.path) if e.path else None
        lock = Path(os.path.realpath(where)) / LOCK_FILE_NAME if where else LOCK_FILE_NAME
        print(f"kafkalog serve: cannot lock {lock}: {e.message}", file=sys.stderr)
        return 3
    except KafkalogError as e:
        print(f"kafkalog serve: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kafkalog serve: {e}", file=sys.stderr)
        return 3
    return 0
