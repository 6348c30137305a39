"""The wire protocol's use of the shared message engine (:mod:`kafkalog.format.message`).

A request that breaks its schema is the client's fault: :class:`~.errors.InvalidRequestError`,
naming the API, version, field path and byte. Strings must be UTF-8. Unknown tagged fields are
skipped, as Kafka's request readers do. Handlers build one response for every version: fields
the version does not carry are dropped, and null where a field is not nullable writes its empty
value. A struct the tables of several APIs hold alike is written once, in :data:`STRUCTS`.
"""

from __future__ import annotations

from types import MappingProxyType

from ..format.message import Dialect, Message
from .errors import InvalidRequestError

__all__ = ["WIRE", "api_message"]

WIRE = Dialect(
    InvalidRequestError, "", utf8_errors="strict", keep_unknown_tags=False, strict_writes=False
)


# Structs the messages of several APIs hold alike, named in their tables (``[]Name``); Kafka
# declares each anew in every message, with the same fields.
STRUCTS = MappingProxyType(
    {
        # A broker's address, sent where a response names a new partition leader.
        "NodeEndpoint": """
node_id int32
host string
port int32
rack string ? =null
""",
        # A topic's partitions and the error code of each.
        "TopicPartitionErrors": """
name string
partitions []
  partition_index int32
  error_code int16
""",
    }
)


def api_message(api_key: int, name: str, versions: str, flexible: str, table: str) -> Message:
    """A request or response schema: api key, name, versions served, flexible versions."""
    return Message(name, versions, flexible, table, api_key=api_key, dialect=WIRE, structs=STRUCTS)
