"""``kafkalog make-bootable``: turn a data directory kafkalog wrote into one a new single-node
KRaft broker boots from and serves (the offline bulk load into a new Kafka node).

It writes ``meta.properties``, the bootstrap records ``kafka-storage format`` would write plus a
TopicRecord and PartitionRecords for every topic and partition in the directory (with the topic
ids of their ``partition.metadata``), and the high watermark checkpoint: see
:mod:`kafkalog.log.datadir.bootable` and docs/log.md.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .arguments import add_json_flag, bounded_int
from .failures import UsageError, guarded
from .output import plural, write_json
from .remote import refuse_urls

SUMMARY = "make a kafkalog-written data directory bootable by a new single-node KRaft broker"
DESCRIPTION = (
    "Write what a new single-node Kafka KRaft broker (process.roles="
    "broker,controller, a static controller.quorum.voters) needs to boot from DATA_DIR and "
    "serve every partition in it, instead of `kafka-storage format`: meta.properties "
    "(node.id, cluster.id, directory.id), the bootstrap records (the release's "
    "metadata.version and features, then a TopicRecord per topic with the id of its "
    "partition.metadata, its configs, a PartitionRecord per partition on the node, and "
    "the next producer id above the logs' producers) and replication-offset-checkpoint. "
    "The controller appends the bootstrap records to its metadata log when it first starts."
)
EXAMPLES = """\
examples:
  kafkalog make-bootable data --node-id 1
  kafkalog make-bootable data --node-id 1 --release-version 4.4 --json

then start Kafka on it with no `kafka-storage format`, a server.properties holding:
  process.roles=broker,controller
  node.id=1
  controller.quorum.voters=1@localhost:9093
  controller.listener.names=CONTROLLER
  listeners=PLAINTEXT://:9092,CONTROLLER://:9093
  log.dirs=/path/to/data

exit status: 0 done, 1 the directory cannot be made bootable (a broker already ran on it,
partitions of a topic with different ids), 2 usage error, 3 I/O error or the directory is locked
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..log.datadir import DEFAULT_RELEASE, RELEASES

    parser.add_argument("data_dir", metavar="DATA_DIR", help="a data directory kafkalog wrote")
    parser.add_argument(
        "--node-id",
        type=bounded_int(0, 0x7FFFFFFF),
        metavar="N",
        help="the broker's node.id (default: meta.properties', else 1)",
    )
    parser.add_argument(
        "--cluster-id",
        metavar="ID",
        help="the cluster id, a Kafka Uuid (default: meta.properties', else a new one)",
    )
    parser.add_argument(
        "--release-version",
        default=DEFAULT_RELEASE,
        metavar="VERSION",
        help="the Kafka release whose metadata.version and features to bootstrap with, as "
        "`kafka-storage format --release-version` (one of "
        f"{', '.join(sorted(RELEASES))}; default {DEFAULT_RELEASE}, which every 4.x broker "
        "accepts; 4.4 writes the bootstrap snapshot that only Kafka 4.4+ reads)",
    )
    add_json_flag(parser, help="print the result as one JSON object")


@guarded("make-bootable")
def run(args: argparse.Namespace) -> int:
    from ..log.datadir import make_bootable

    refuse_urls([args.data_dir], does="writes a broker's files into the data directory")
    try:
        result = make_bootable(
            args.data_dir,
            node_id=args.node_id,
            cluster_id=args.cluster_id,
            release_version=args.release_version,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.json:
        write_json(result.to_json())
        return EXIT_OK
    r = result
    print(
        f"{r.data_dir}: bootable by a single-node KRaft broker: node.id={r.node_id} "
        f"cluster.id={r.cluster_id}, metadata.version {r.release.metadata_version} "
        f"(release {r.release.name}), {plural(len(r.topics), 'topic')}, "
        f"{plural(r.partition_count, 'partition')}"
    )
    print(f"  wrote {r.bootstrap_file} ({plural(r.records, 'bootstrap record')}), meta.properties")
    for tp in r.created_partitions:
        print(f"  created the missing partition {tp.topic}-{tp.partition} (empty)")
    for tp in r.written_partition_metadata:
        print(f"  wrote partition.metadata of {tp.topic}-{tp.partition}")
    print("the broker's server.properties must have (kafka-storage format is not to be run):")
    for key, value in r.server_properties("HOST:PORT").items():
        print(f"  {key}={value}")
    print("  (and listeners with a CONTROLLER listener on that HOST:PORT)")
    return EXIT_OK
