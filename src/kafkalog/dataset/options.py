"""Options of the ``kafkalog`` data source: Spark's Kafka source and sink option names and
meanings, checked on the driver before any task runs.

Spark hands options over lower-cased; they are matched case-insensitively here and named in
messages as Spark's documentation spells them. Options of Spark's Kafka source that mean nothing
for a directory (``kafka.bootstrap.servers``, consumer and producer settings, retries, group ids)
are accepted and ignored with a warning, so a job written for a broker runs unchanged; any other
unknown option, a bad value or a contradictory combination raises :class:`OptionError`.
"""

from __future__ import annotations

import contextvars
import difflib
import glob
import json
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from ..errors import OptionError

__all__ = [
    "OptionError",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
]

EARLIEST, LATEST = -2, -1

# Topics Kafka marks internal (``org.apache.kafka.common.internals.Topic.isInternal``: the group,
# transaction and share-group state topics) and KRaft's metadata log. A Kafka consumer leaves them
# out of pattern subscriptions (``exclude.internal.topics=true``, the default, which Spark's Kafka
# source keeps) but reads them when they are subscribed or assigned by name.
INTERNAL_TOPICS = frozenset(
    ("__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata")
)


def is_internal_topic(topic: str) -> bool:
    """Whether Kafka treats ``topic`` as internal (left out of pattern subscriptions)."""
    return topic in INTERNAL_TOPICS


_CANONICAL = {
    name.lower(): name
    for name in (
        "path", "paths", "assign", "subscribe", "subscribePattern", "startingOffsets",
        "endingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy", "endingTimestamp", "endingOffsetsByTimestamp",
        "failOnDataLoss", "includeHeaders", "minPartitions", "maxRecordsPerPartition",
        "kafka.isolation.level", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
        "maxTriggerDelay", "pushdown", "topic", "numPartitions", "codec",
        "kafka.compression.type", "compressionLevel", "batchSize", "kafka.batch.size",
        "segmentBytes", "sinkId", "checkpointLocation", "dataLossLog", "lockTimeoutMs",
        "remoteStorage",
    )
}  # fmt: skip
# Spark Kafka options (besides kafka.*) with no meaning for files: accepted, ignored, warned about.
_IGNORED = {
    name.lower(): name
    for name in (
        "groupIdPrefix", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
        "kafkaConsumer.pollTimeoutMs", "kafkaProducer.cacheTimeout",
        "kafkaProducer.cacheEvictorThreadRunInterval", "kafkaConsumer.cache.timeout",
        "kafkaConsumer.fetchedData.cache.timeout", "consumer.cache.capacity",
        "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    )
}  # fmt: skip
_READ_ONLY = {"assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
              "startingtimestamp", "startingoffsetsbytimestamp",
              "startingoffsetsbytimestampstrategy", "endingtimestamp", "endingoffsetsbytimestamp",
              "failondataloss", "includeheaders", "minpartitions", "maxrecordsperpartition",
              "kafka.isolation.level", "maxoffsetspertrigger", "minoffsetspertrigger",
              "maxtriggerdelay", "pushdown", "datalosslog", "remotestorage"}  # fmt: skip
_WRITE_ONLY = {"topic", "numpartitions", "codec", "kafka.compression.type", "compressionlevel",
               "batchsize", "kafka.batch.size", "segmentbytes", "sinkid",
               "locktimeoutms"}  # fmt: skip
_STREAM_ONLY = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"}


# The user's spelling of each option, by lower-cased key, while options are parsed. Through
# Spark it is lost before kafkalog sees the options (Spark's JVM lower-cases the names of a
# Python data source's options), so names are then given as Spark's documentation spells them.
_SPELLING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "kafkalog_option_spelling", default=None
)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    """Options by lower-cased name (Spark's names are case-insensitive); remembers the user's
    spelling of each for messages."""
    _SPELLING.set({str(k).lower(): str(k) for k in options})
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _name(key: str) -> str:
    spelled = (_SPELLING.get() or {}).get(key)
    if spelled is not None and spelled != key:
        return spelled  # as the user wrote it
    return _CANONICAL.get(key, spelled or key)


def _suggest(key: str) -> str:
    known = {**_CANONICAL, **_IGNORED}
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f" (did you mean {known[close[0]]!r}?)" if close else ""


def _warn_ignored(key: str, why: str) -> None:
    warnings.warn(f"kafkalog: option {_name(key)!r} ignored: {why}", stacklevel=3)


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {_name(key)} must be true or false, not {raw!r}")
    return value == "true"


def _int(options: Mapping[str, str], key: str, *, minimum: int = 1) -> int | None:
    raw = options.get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {_name(key)} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {_name(key)} must be at least {minimum}, not {value}")
    return value


def _partition_map(raw: str, key: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 23, "1": -2}}`` as {(topic, partition): value}."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {_name(key)} is not valid JSON ({e}): {raw!r}") from None
    if not isinstance(doc, dict):
        raise OptionError(f'option {_name(key)} must be a JSON object like {{"t":{{"0":23}}}}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise OptionError(
                f"option {_name(key)}: topic {topic!r} must map partitions to numbers"
            )
        for p, v in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise OptionError(f"option {_name(key)}: bad partition {p!r}") from None
            if not isinstance(v, int) or isinstance(v, bool):
                raise OptionError(f"option {_name(key)}: {topic}-{p} must map to an integer")
            out[(topic, partition)] = v
    return out


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: 'earliest', 'latest', per-partition offsets (-2 earliest,
    -1 latest), a global timestamp or per-partition timestamps."""

    kind: str  # earliest | latest | offsets | timestamp | timestamps
    offsets: dict = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...]
    assign: dict[str, tuple[int, ...]] | None
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    read_committed: bool
    pushdown: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    data_loss_log: str | None = None  # a directory: each skipped damage or loss as a JSON line
    # Kafka's LocalTieredStorage directory (its rsm.config.dir): offsets tiered storage moved
    # there are read from it (docs/tiered-storage.md)
    remote_storage: str | None = None

    def selects(self, topic: str, partition: int) -> bool:
        if self.assign is not None:
            return partition in self.assign.get(topic, ())
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return (
                not is_internal_topic(topic)
                and re.fullmatch(self.subscribe_pattern, topic) is not None
            )
        return not topic.startswith("__")  # internal topics, and others named like them


def _paths(options: Mapping[str, str]) -> tuple[str, ...]:
    paths: list[str] = []
    if options.get("paths"):
        try:
            listed = json.loads(options["paths"])
        except json.JSONDecodeError:
            listed = [options["paths"]]
        paths.extend(str(p) for p in (listed if isinstance(listed, list) else [listed]))
    if options.get("path"):
        paths.insert(0, options["path"])
    if not paths:
        raise OptionError("no data directory: use load(dataDir) (or load([dir1, dir2]))")
    out: list[str] = []
    for raw in paths:
        out.extend([_storage_url(raw)] if _is_storage_url(raw) else _expand(_local_path(raw)))
    return tuple(dict.fromkeys(out))


def _is_storage_url(raw: str) -> bool:
    from ..log.storage import SCHEMES

    return "://" in raw and urlparse(raw).scheme.lower() in SCHEMES


def _storage_url(raw: str) -> str:
    """A data directory in object storage (docs/object-storage.md), checked: a supported
    scheme, no credentials in it, no glob (object stores have no directories to match)."""
    from ..log.storage import RemoteStorageError, filesystem_for

    if any(c in raw for c in "*?["):
        raise OptionError(f"path {raw!r}: globs are not supported in object storage URLs")
    try:
        return filesystem_for(raw)[2]
    except (ValueError, RemoteStorageError) as e:
        raise OptionError(f"path: {e}") from None


def _local_path(raw: str) -> str:
    """A path, or a ``file:`` URI as Spark and Hadoop write them (``file:///d``, ``file:/d``)."""
    if not raw.startswith("file:") and "://" not in raw:
        return raw
    url = urlparse(raw)
    if url.scheme != "file":
        raise OptionError(
            f"path {raw!r}: kafkalog reads data directories on a local or mounted filesystem "
            f"(a path or a file:// URI) or in object storage (s3://, gs://, abfss://, hdfs://), "
            f"not {url.scheme}://"
        )
    if url.netloc not in ("", "localhost"):
        raise OptionError(
            f"path {raw!r}: a file:// URI names a path on this machine (file:///dir), "
            f"not on host {url.netloc!r}"
        )
    return unquote(url.path)


def _expand(path: str) -> list[str]:
    """A glob (``/data/broker-*/kafka-logs``) as the directories it matches, in order."""
    if not any(c in path for c in "*?[") or os.path.exists(path):
        return [path]
    matched = sorted(p for p in glob.glob(path) if os.path.isdir(p))
    if not matched:
        raise OptionError(f"path {path!r} is a glob that matches no directory")
    return matched


def _duration_ms(raw: str, key: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", str(raw))
    if not m:
        raise OptionError(
            f"option {_name(key)} must be a duration like '15m' or '30s', not {raw!r}"
        )
    unit = {None: 1, "ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000, "d": 86400000}
    return int(m.group(1)) * unit[m.group(2)]


def _check_keys(options: Mapping[str, str], *, reading: bool, streaming: bool) -> None:
    for key in options:
        if key.startswith("kafka."):
            if key in ("kafka.isolation.level", "kafka.compression.type", "kafka.batch.size"):
                if reading and key != "kafka.isolation.level":
                    _warn_ignored(key, "it only applies to writing")
                elif not reading and key == "kafka.isolation.level":
                    _warn_ignored(key, "it only applies to reading")
                continue
            _warn_ignored(key, "Kafka client settings mean nothing for a data directory")
        elif key in _STREAM_ONLY and reading and streaming is False:
            _warn_ignored(key, "it only applies to streaming queries")
        elif key in _IGNORED and key not in _STREAM_ONLY:
            _warn_ignored(key, "it means nothing for a data directory")
        elif key in ("path", "paths", "checkpointlocation"):
            continue
        elif key in _READ_ONLY:
            if not reading:
                raise OptionError(f"option {_name(key)} is for reading, not writing")
        elif key in _WRITE_ONLY:
            if reading:
                raise OptionError(f"option {_name(key)} is for writing, not reading")
        else:
            raise OptionError(
                f"unknown option {_name(key)!r}{_suggest(key)}: remove it, or see docs/spark.md "
                f"for the options of the kafkalog source"
            )


def _offset_spec(options, key: str, *, start: bool, streaming: bool | None) -> OffsetSpec:
    raw = options.get(key)
    default = "latest" if (streaming or not start) else "earliest"
    batch = streaming is False
    text = (raw if raw is not None else default).strip()
    if text.lower() == "earliest":
        if not start:
            raise OptionError("endingOffsets cannot be 'earliest' (a range ending at the start)")
        return OffsetSpec("earliest")
    if text.lower() == "latest":
        if start and batch:
            raise OptionError(
                "startingOffsets cannot be 'latest' for a batch query: use 'earliest' or JSON "
                "offsets (a batch query reads a range that ends at endingOffsets)"
            )
        return OffsetSpec("latest")
    offsets = _partition_map(text, key)
    for tp, v in offsets.items():
        if v < EARLIEST:
            raise OptionError(f"option {_name(key)}: {tp[0]}-{tp[1]} has invalid offset {v}")
        if start and batch and v == LATEST:
            raise OptionError(
                f"startingOffsets for {tp[0]}-{tp[1]} cannot be -1 (latest) for a batch query"
            )
        if not start and v == EARLIEST:
            raise OptionError(f"endingOffsets for {tp[0]}-{tp[1]} cannot be -2 (earliest)")
    return OffsetSpec("offsets", offsets)


def _timestamp_spec(options, global_key: str, map_key: str) -> OffsetSpec | None:
    if options.get(global_key) is not None:
        ts = _int(options, global_key, minimum=0)
        return OffsetSpec("timestamp", timestamp=ts)
    if options.get(map_key) is not None:
        stamps = _partition_map(options[map_key], map_key)
        for tp, v in stamps.items():
            if v < 0:
                raise OptionError(f"option {_name(map_key)}: {tp[0]}-{tp[1]} has timestamp {v}")
        return OffsetSpec("timestamps", stamps)
    return None


def parse_read_options(
    options: Mapping[str, str], *, streaming: bool | None = False
) -> ReadOptions:
    """Check every read option; warnings for ignored ones, OptionError for the rest.
    ``streaming=None`` checks what holds for batch and streaming queries alike (at ``load()``,
    before Spark says which it is)."""
    options = _lower(options)
    _check_keys(options, reading=True, streaming=streaming)
    chosen = [k for k in ("assign", "subscribe", "subscribepattern") if k in options]
    if len(chosen) > 1:
        raise OptionError(
            "only one of assign, subscribe or subscribePattern can be given, not "
            + " and ".join(_name(k) for k in chosen)
        )
    assign = subscribe = pattern = None
    if "assign" in options:
        doc = options["assign"]
        try:
            parsed = json.loads(doc)
            if not isinstance(parsed, dict) or not all(
                isinstance(v, list) and all(isinstance(p, int) for p in v) for v in parsed.values()
            ):
                raise ValueError
        except ValueError:
            raise OptionError(
                f'option assign must be JSON like {{"topicA":[0,1]}}, not {doc!r}'
            ) from None
        assign = {t: tuple(sorted(set(ps))) for t, ps in parsed.items()}
        if not any(assign.values()):
            raise OptionError("option assign names no partition")
    elif "subscribe" in options:
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif "subscribepattern" in options:
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid regex: {e}") from None
    if streaming and (
        "endingoffsets" in options
        or "endingtimestamp" in options
        or "endingoffsetsbytimestamp" in options
    ):
        raise OptionError("ending offsets and timestamps are not valid in streaming queries")
    starting = _timestamp_spec(options, "startingtimestamp", "startingoffsetsbytimestamp")
    if starting is None:
        starting = _offset_spec(options, "startingoffsets", start=True, streaming=streaming)
    ending = _timestamp_spec(options, "endingtimestamp", "endingoffsetsbytimestamp")
    if ending is None:
        ending = _offset_spec(options, "endingoffsets", start=False, streaming=streaming)
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    isolation = options.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            "option kafka.isolation.level must be read_uncommitted or read_committed, "
            f"not {isolation!r}"
        )
    max_trigger = _int(options, "maxoffsetspertrigger") if streaming is not False else None
    min_trigger = _int(options, "minoffsetspertrigger") if streaming is not False else None
    delay = _duration_ms(options.get("maxtriggerdelay", "15m"), "maxtriggerdelay")
    if max_trigger is not None and min_trigger is not None and min_trigger > max_trigger:
        raise OptionError("minOffsetsPerTrigger cannot be greater than maxOffsetsPerTrigger")
    return ReadOptions(
        paths=_paths(options),
        assign=assign,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        fail_on_data_loss=_bool(options, "failondataloss", True),
        include_headers=_bool(options, "includeheaders", False),
        min_partitions=_int(options, "minpartitions"),
        max_records_per_partition=_int(options, "maxrecordsperpartition"),
        read_committed=isolation == "read_committed",
        pushdown=_bool(options, "pushdown", False),
        max_offsets_per_trigger=max_trigger,
        min_offsets_per_trigger=min_trigger,
        max_trigger_delay_ms=delay,
        data_loss_log=options.get("datalosslog") or None,
        remote_storage=options.get("remotestorage") or None,
    )


_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class WriteOptions:
    path: str
    topic: str | None
    num_partitions: int | None
    codec: str
    compression_level: int | None
    batch_size: int
    segment_bytes: int | None
    sink_id: str | None
    lock_timeout_ms: int = 5000  # how long a commit waits for the data directory's lock


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    options = _lower(options)
    _check_keys(options, reading=False, streaming=False)
    paths = _paths(options)
    if len(paths) != 1:
        raise OptionError(f"write to one data directory, not {len(paths)}")
    codecs = {options.get(k).strip().lower() for k in ("codec", "kafka.compression.type")
              if options.get(k) is not None}  # fmt: skip
    if len(codecs) > 1:
        raise OptionError(f"codec and kafka.compression.type disagree: {sorted(codecs)}")
    codec = codecs.pop() if codecs else "none"
    if codec not in _CODECS:
        raise OptionError(f"codec must be one of {', '.join(_CODECS)}, not {codec!r}")
    sizes = {_int(options, k) for k in ("batchsize", "kafka.batch.size") if k in options}
    if len(sizes) > 1:
        raise OptionError("batchSize and kafka.batch.size disagree")
    level = None
    if options.get("compressionlevel") is not None:
        level = _int(options, "compressionlevel", minimum=-131072)
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic is empty")
    return WriteOptions(
        path=paths[0],
        topic=topic,
        num_partitions=_int(options, "numpartitions"),
        codec=codec,
        compression_level=level,
        batch_size=sizes.pop() if sizes else 16384,
        segment_bytes=_int(options, "segmentbytes", minimum=1024),
        sink_id=options.get("sinkid") or options.get("checkpointlocation"),
        lock_timeout_ms=_int_or(options, "locktimeoutms", 5000),
    )


def _int_or(options: Mapping[str, str], key: str, default: int) -> int:
    value = _int(options, key, minimum=0)
    return default if value is None else value
