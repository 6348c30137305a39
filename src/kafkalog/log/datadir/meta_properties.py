"""A log dir's ``meta.properties``: who owns the directory (MetaProperties.java).

A Java properties file (see :mod:`kafkalog.log.datadir.java_properties`) with:

- version 0 (ZooKeeper era, also KRaft clusters migrated from ZooKeeper): ``broker.id`` and
  ``cluster.id``, both optional; no ``version`` key also means 0;
- version 1 (KRaft): ``node.id`` and ``cluster.id`` required, ``directory.id`` (a Kafka base64
  Uuid, KIP-858) optional.

``cluster.id`` is any string (usually a base64 Uuid, but not always). Keys Kafka does not know
are kept (``extra``) and written back. Broken values raise :class:`CorruptCheckpointError`
naming the line; writes are atomic.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CorruptCheckpointError
from .checkpoints import parse_java_int, read_text_file, write_file_atomically
from .java_properties import load_properties_with_lines, store_properties
from .kafka_uuid import uuid_from_kafka_string, uuid_to_kafka_string

__all__ = [
    "META_PROPERTIES_FILE_NAME",
    "MetaProperties",
    "read_meta_properties",
    "write_meta_properties",
]

META_PROPERTIES_FILE_NAME = "meta.properties"

VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"  # version 0
NODE_ID_PROP = "node.id"  # version 1
DIRECTORY_ID_PROP = "directory.id"
_KNOWN = {VERSION_PROP, CLUSTER_ID_PROP, DIRECTORY_ID_PROP}


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaProperties:
    """The contents of meta.properties. ``node_id`` is ``broker.id`` in version 0."""

    version: int = 0
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: uuid.UUID | None = None
    extra: tuple[tuple[str, str], ...] = ()  # unknown keys, in file order

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise ValueError(f"unknown meta.properties version {self.version}")
        if self.version == 1 and (self.cluster_id is None or self.node_id is None):
            raise ValueError("version 1 meta.properties needs cluster.id and node.id")

    def to_properties(self) -> dict[str, str]:
        """The key/value pairs Kafka writes (MetaProperties.toProperties), then ``extra``."""
        props = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.node_id is not None:
            props[BROKER_ID_PROP if self.version == 0 else NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = uuid_to_kafka_string(self.directory_id)
        for key, value in self.extra:
            props.setdefault(key, value)
        return props

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        *,
        path: str | None = None,
        lines: Mapping[str, int] | None = None,
    ) -> MetaProperties:
        """Kafka's MetaProperties.Builder(Properties) + build(), with errors naming the line."""
        lines = lines or {}

        def fail(key: str, why: str) -> CorruptCheckpointError:
            return CorruptCheckpointError(why, path=path, line=lines.get(key))

        text = props.get(VERSION_PROP, "0")
        version = _int(text.strip(), VERSION_PROP, path, lines.get(VERSION_PROP))
        if version not in (0, 1):
            raise fail(VERSION_PROP, f"unknown meta.properties version number {version}")
        id_prop = BROKER_ID_PROP if version == 0 else NODE_ID_PROP
        node_id = None
        if id_prop in props:
            node_id = _int(props[id_prop], id_prop, path, lines.get(id_prop))
        elif version == 1:
            raise fail(id_prop, f"{id_prop} was not found (required in version 1)")
        cluster_id = props.get(CLUSTER_ID_PROP)
        if version == 1 and cluster_id is None:
            raise fail(CLUSTER_ID_PROP, "cluster.id was not found (required in version 1)")
        directory_id = None
        if DIRECTORY_ID_PROP in props:
            try:
                directory_id = uuid_from_kafka_string(props[DIRECTORY_ID_PROP])
            except ValueError as e:
                raise fail(
                    DIRECTORY_ID_PROP, f"unable to read directory.id as a Uuid: {e}"
                ) from None
        known = _KNOWN | {id_prop}
        extra = tuple((k, v) for k, v in props.items() if k not in known)
        return cls(
            version=version,
            cluster_id=cluster_id,
            node_id=node_id,
            directory_id=directory_id,
            extra=extra,
        )


def _int(text: str, key: str, path: str | None, line: int | None) -> int:
    try:
        return parse_java_int(text, what=key, path=path or "", line=line or 0)
    except CorruptCheckpointError as e:
        raise CorruptCheckpointError(
            f"unable to read {key} as a base-10 int: {text!r}", path=path, line=line
        ) from e


def read_meta_properties(path: str | os.PathLike) -> MetaProperties:
    """Parse meta.properties (read as ISO-8859-1, as Kafka's Properties.load(InputStream) does)."""
    where = os.fspath(path)
    props, lines = load_properties_with_lines(read_text_file(path, encoding="latin-1"), path=where)
    return MetaProperties.from_properties(props, path=where, lines=lines)


def write_meta_properties(
    path: str | os.PathLike,
    meta: MetaProperties,
    *,
    date: str | None = None,
    sort_keys: bool = True,
) -> None:
    """Atomically write meta.properties as Kafka does: ``#``, ``#<date>`` (now unless given),
    keys sorted (JDK 18+ order) unless ``sort_keys`` is False."""
    text = store_properties(meta.to_properties(), comment="", date=date, sort_keys=sort_keys)
    write_file_atomically(path, text.encode("ascii"))
