"""``kafkalog serve DATA_DIR``: a single-node Kafka-compatible broker over a data directory."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from ..errors import EXIT_IO, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, KafkalogError
from .failures import report

SUMMARY = "serve a data directory to Kafka clients (single node)"
DESCRIPTION = (
    "Run a single-node broker speaking the Kafka protocol over DATA_DIR: "
    "produce, fetch, consumer groups and transactions from any Kafka client."
)
EXAMPLES = """\
examples:
  kafkalog serve ./data                          # clients bootstrap from 127.0.0.1:9092
  kafkalog serve ./data --listen 0.0.0.0:9092 --advertised-host myhost
  kafkalog serve ./data --listen 127.0.0.1:0     # any free port, printed on start
  kafkalog serve ./data --listeners SSL://127.0.0.1:9093 --ssl-certfile server.pem \\
      --ssl-keyfile server.key                   # TLS (docs/server.md, Security)
  kafkalog serve ./data --listeners SASL_PLAINTEXT://127.0.0.1:9094 --sasl-users users.txt
"""


def _listen(text: str) -> str:
    _host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError("expected NAME=PASSWORD")  # no echo: a password
    return name.strip(), password


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "data_dir", metavar="DATA_DIR", type=Path, nargs="+", help="log directories"
    )
    parser.add_argument(
        "--listen",
        type=_listen,
        default=None,
        metavar="HOST:PORT",
        help="a PLAINTEXT listener (default 127.0.0.1:9092 unless --listeners is given)",
    )
    parser.add_argument(
        "--advertised-host", help="host name given to clients (default: listen host)"
    )
    sec = parser.add_argument_group(
        "listeners and security",
        "Kafka's listeners, ssl.* and sasl.* settings: TLS on SSL and SASL_SSL listeners, "
        "SASL/PLAIN and SASL/SCRAM-SHA-256/512 on SASL_PLAINTEXT and SASL_SSL ones "
        "(docs/server.md, Security)",
    )
    sec.add_argument(
        "--listeners",
        action="append",
        default=[],
        metavar="NAME://HOST:PORT,...",
        help="listeners, each named by its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, "
        "SASL_SSL) or mapped to one; besides --listen when both are given; port 0: any free one",
    )
    sec.add_argument(
        "--advertised-listeners",
        default="",
        metavar="NAME://HOST:PORT,...",
        help="the host and port told to clients of a listener (default: --advertised-host or "
        "the listener's host, and its port)",
    )
    sec.add_argument(
        "--listener-security-protocol-map",
        default="",
        metavar="NAME:PROTOCOL,...",
        help="security protocols of listeners with names of their own",
    )
    sec.add_argument("--ssl-certfile", type=Path, metavar="PEM", help="server certificate chain")
    sec.add_argument(
        "--ssl-keyfile", type=Path, metavar="PEM", help="its private key (default: in certfile)"
    )
    sec.add_argument(
        "--ssl-key-password-file", type=Path, metavar="FILE", help="the key's password, if any"
    )
    sec.add_argument(
        "--ssl-cafile", type=Path, metavar="PEM", help="CA certificates for client certificates"
    )
    sec.add_argument(
        "--ssl-client-auth",
        choices=("none", "requested", "required"),
        default="none",
        help="ssl.client.auth: ask for client certificates (default: none)",
    )
    sec.add_argument(
        "--sasl-users",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="SASL users, user:password lines (# comments)",
    )
    sec.add_argument(
        "--sasl-user",
        type=_user,
        action="append",
        default=[],
        metavar="NAME=PASSWORD",
        help="a SASL user (repeatable; prefer --sasl-users: command lines are visible to ps)",
    )
    sec.add_argument(
        "--sasl-enabled-mechanisms",
        default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        metavar="MECH,...",
        help="sasl.enabled.mechanisms (default: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512)",
    )
    sec.add_argument(
        "--scram-iterations",
        type=int,
        default=4096,
        metavar="N",
        help="PBKDF2 iterations of the SCRAM credentials derived at start (at least 4096)",
    )
    parser.add_argument("--node-id", type=int, default=0)
    parser.add_argument("--num-partitions", type=int, default=1, help="for auto-created topics")
    parser.add_argument("--no-auto-create-topics", action="store_true")
    parser.add_argument("--max-request-bytes", type=int, default=100 * 1024 * 1024)
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--max-connections-per-ip", type=int, default=1000)
    parser.add_argument("--no-sendfile", action="store_true", help="copy fetched records instead")
    parser.add_argument(
        "--acks-all-durability",
        choices=("fsync", "page-cache"),
        default="fsync",
        help="when an acks=all produce is answered: fsync (default) once its records are "
        "fsynced, so they survive a power loss; page-cache once they are appended, the OS "
        "flushing them as Kafka's default flush policy does (flush.messages and flush.ms, or "
        "log.flush.interval.*, still flush before the answer)",
    )
    parser.add_argument(
        "--max-open-files",
        type=int,
        default=None,
        metavar="N",
        help="segment and index files open at once; the least recently used are closed and "
        "reopened on demand (default: half of what the open-files limit leaves)",
    )
    parser.add_argument(
        "--offsets-topic-num-partitions",
        type=int,
        default=50,
        metavar="N",
        help="partitions of __consumer_offsets when it is created",
    )
    parser.add_argument(
        "--transaction-state-log-num-partitions",
        type=int,
        default=50,
        metavar="N",
        help="partitions of __transaction_state when it is created",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_setting,
        help="a broker setting by Kafka's name (group.*, transaction.*, offsets.*, "
        "log.retention.check.interval.ms, log.initial.task.delay.ms, log.cleaner.enable, "
        "log.cleaner.backoff.ms, log.cleaner.min.cleanable.ratio, "
        "log.cleaner.dedupe.buffer.size, log.cleaner.io.buffer.size)",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )


def _security(args: argparse.Namespace) -> dict:
    """The listeners, TLS and SASL settings; ValueError saying what is wrong."""
    from ..server.security.listeners import (
        parse_endpoint,
        parse_listeners,
        parse_protocol_map,
    )
    from ..server.security.sasl import SUPPORTED_MECHANISMS, SaslSettings, Users, read_users_file
    from ..server.security.tls import TlsSettings

    protocol_map = parse_protocol_map(args.listener_security_protocol_map)
    given = ([args.listen] if args.listen else []) + list(args.listeners)
    listeners = parse_listeners(given or ["127.0.0.1:9092"], protocol_map)
    advertised = {}
    for part in filter(None, (p.strip() for p in args.advertised_listeners.split(","))):
        name, host, port = parse_endpoint(part)
        if not any(lis.name == name for lis in listeners):
            raise ValueError(f"advertised listener {name} is not a listener")
        advertised[name] = (host or args.advertised_host or "127.0.0.1", port)
    tls = None
    if args.ssl_certfile is not None:
        password = None
        if args.ssl_key_password_file is not None:
            password = args.ssl_key_password_file.read_text().rstrip("\r\n")
        tls = TlsSettings(
            certfile=args.ssl_certfile,
            keyfile=args.ssl_keyfile,
            key_password=password,
            cafile=args.ssl_cafile,
            client_auth=args.ssl_client_auth,
        )
    elif any(lis.tls for lis in listeners):
        raise ValueError("SSL and SASL_SSL listeners need --ssl-certfile (and --ssl-keyfile)")
    mechanisms = tuple(m.strip().upper() for m in args.sasl_enabled_mechanisms.split(",") if m)
    unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unknown or not mechanisms:
        raise ValueError(
            f"unsupported SASL mechanism {', '.join(unknown) or '(none)'}: "
            f"choose from {', '.join(sorted(SUPPORTED_MECHANISMS))}"
        )
    if args.scram_iterations < 4096:
        raise ValueError("--scram-iterations must be at least 4096 (Kafka's minimum)")
    passwords: dict[str, str] = {}
    for path in args.sasl_users:
        passwords.update(read_users_file(path))
    passwords.update(dict(args.sasl_user))
    sasl = None
    if passwords:
        users = Users.from_passwords(passwords, mechanisms, args.scram_iterations)
        sasl = SaslSettings(users=users, mechanisms=mechanisms)
        logging.getLogger("kafkalog.server").info(
            "SASL: %d users, mechanisms %s", len(users), ",".join(mechanisms)
        )
    elif any(lis.sasl for lis in listeners):
        raise ValueError("SASL listeners need users: --sasl-users FILE or --sasl-user NAME=PW")
    return {
        "listeners": listeners,
        "advertised_listeners": advertised,
        "tls": tls,
        "sasl": sasl,
        "host": listeners[0].host,
        "port": listeners[0].port,
    }


def run(args: argparse.Namespace) -> int:
    from ..server.app import serve
    from ..server.config import ServerConfig

    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        security = _security(args)
    except (ValueError, OSError) as e:
        report("serve", e)
        return EXIT_USAGE
    config = ServerConfig(
        data_dirs=list(args.data_dir),
        **security,
        advertised_host=args.advertised_host,
        node_id=args.node_id,
        num_partitions=args.num_partitions,
        auto_create_topics_enable=not args.no_auto_create_topics,
        socket_request_max_bytes=args.max_request_bytes,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        sendfile=not args.no_sendfile,
        acks_all_fsync=args.acks_all_durability == "fsync",
        max_open_files=args.max_open_files,
        offsets_topic_num_partitions=args.offsets_topic_num_partitions,
        transaction_state_log_num_partitions=args.transaction_state_log_num_partitions,
        extra=dict(args.config),
    )

    def ready(broker) -> None:
        lines = [f"kafkalog serving {broker.host}:{broker.port}"]
        listeners = config.listeners
        if len(listeners) > 1 or listeners[0].protocol != "PLAINTEXT":
            for listener in listeners:
                host, port = broker.endpoints[listener.name]
                lines.append(f"kafkalog listener {listener.name}://{host}:{port}")
        print("\n".join(lines), file=sys.stderr, flush=True)

    from ..log.datadir import LOCK_FILE_NAME, DataDirLockedError

    try:
        asyncio.run(serve(config, ready=ready))
    except DataDirLockedError as e:  # another broker or kafkalog process holds the directory
        where = Path(e.path) if e.path else None
        lock = Path(os.path.realpath(where)) / LOCK_FILE_NAME if where else LOCK_FILE_NAME
        report("serve", f"cannot lock {lock}: {e.message}")
        return EXIT_IO
    except (KafkalogError, ValueError) as e:  # ValueError: TLS files or listeners
        report("serve", e)
        return EXIT_PROBLEMS
    except OSError as e:
        report("serve", e)
        return EXIT_IO
    return EXIT_OK
