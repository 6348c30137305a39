"""The writer process of tests/log/test_crash.py: appends to a kafkalog data directory until killed.

Usage: ``python crash_writer.py DATA_DIR SEED``, or ``python crash_writer.py --serve``: then each
``run DATA_DIR SEED`` line on stdin forks a writer process (``pid <pid>`` is printed, the writer's
lines follow, then ``exit <wait status>`` once it is gone). Forking from a process that has
already imported kafkalog saves the ~0.5-1 s of interpreter start and imports per writer, so a
test can kill a hundred writers quickly; each writer is still a process of its own.

Opens the data directory writable with LogManager (recovering it if the last writer was killed),
prints ``open <log end offset>``, then appends batches forever to partition ``crash-0`` and, after
each append, flushes (fsync) and prints ``ack <last offset>``: an acknowledged offset is one whose
flush returned. Every record's key is its sequence number, which the writer takes from the log end
offset, so in a log that lost nothing acknowledged the record at offset ``o`` has key ``o`` and the
value :func:`value_for` ``(o)``. Every few appends it also writes the checkpoints, as a broker does
periodically. Each run is a new idempotent producer (its id is the run's log end offset), so
producer state and ``.snapshot`` files are exercised too.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import traceback

from kafkalog.format import MemoryRecordsBuilder
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition

TOPIC = "crash"
PARTITION = TopicPartition(TOPIC, 0)
TOPIC_CONFIGS = {
    "internal.segment.bytes": "16384",  # small segments: rolls, snapshots, many index files
    "index.interval.bytes": "512",
    "message.timestamp.after.max.ms": str(1 << 50),
    "message.timestamp.before.max.ms": str(1 << 50),
}
T0 = 1_700_000_000_000


def key_for(seq: int) -> bytes:
    return b"%012d" % seq


def value_for(seq: int) -> bytes:
    """A deterministic value of 0 to ~900 bytes for sequence number ``seq``."""
    digest = hashlib.sha256(key_for(seq)).digest()
    return digest * (digest[0] % 29)


def build_batch(first_seq: int, count: int, producer_id: int, base_sequence: int) -> bytes:
    builder = MemoryRecordsBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=base_sequence
    )
    for seq in range(first_seq, first_seq + count):
        builder.append(timestamp=T0 + seq, key=key_for(seq), value=value_for(seq))
    return builder.build()


def say(line: str) -> None:
    """One line to stdout in one write: a kill cannot leave half of it (print may write twice)."""
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def main(data_dir: str, seed: int) -> None:
    rng = random.Random(seed)
    manager = LogManager(data_dir, writable=True, create=True)
    log = manager.get_log(PARTITION)
    if log is None:
        (log,) = manager.create_topic(TOPIC, 1, TOPIC_CONFIGS)
    next_seq = log.log_end_offset
    producer_id, producer_seq = 1000 + next_seq, 0
    say(f"open {next_seq}")
    appends = 0
    while True:
        count = rng.randint(1, 6)
        info = log.append_as_leader(build_batch(next_seq, count, producer_id, producer_seq))
        assert info.first_offset == next_seq, (info, next_seq)
        next_seq += count
        producer_seq += count
        log.flush()
        say(f"ack {info.last_offset}")
        appends += 1
        if appends % 7 == 0:
            manager.checkpoint()


def serve() -> None:
    for line in sys.stdin:
        command, *args = line.split()
        if command != "run":
            break
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the writer
            try:
                main(args[0], int(args[1]))
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(1)
        say(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"exit {status}")


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
    else:
        main(sys.argv[1], int(sys.argv[2]))
