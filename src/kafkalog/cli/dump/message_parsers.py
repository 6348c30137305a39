"""What ``kafkalog dump`` shows for a record's key and value: kafka-dump-log's message parsers.

kafka-dump-log picks one parser per run: a key and a value decoder (StringDecoder by default), or
the offsets, transaction log or cluster metadata decoder. Each turns a record into the text
printed after ``key:`` and ``payload:``; here each also gives the same content as JSON values for
``--json`` (objects, not strings holding JSON) and says when the bytes are damaged, which
kafka-dump-log would crash on or bury in its output.

The internal-topic texts follow Kafka 4.1/4.2: keys ``{"type":"<record type>","data":{...}}``,
values ``{"version":"<v>","data":{...}}``, tombstones ``<DELETE>``, KRaft records
``{"type":"TOPIC_RECORD","version":0,"data":{...}}``; only the fields Kafka writes at the
record's version (:mod:`.kafka_json`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InvalidRecordError, KafkalogError
from ...format.constants import ControlRecordType
from ...format.internal import (
    DecodedMessage,
    decode_consumer_offsets_key,
    decode_consumer_offsets_value,
    decode_consumer_protocol_assignment,
    decode_consumer_protocol_subscription,
    decode_control_value,
    decode_metadata_record,
    decode_transaction_log_key,
    decode_transaction_log_value,
)
from ...format.internal import _group_schemas as group_schemas
from ...format.internal import consumer_offsets as offsets_module
from ...format.internal import control as control_module
from ...format.internal import metadata as metadata_module
from ...format.internal.result import BYTE_ERRORS
from ...format.internal.transaction_state import TRANSACTION_LOG_VALUE, TRANSACTION_STATUSES
from ...format.message import Message, read_message
from ...format.record import Record
from ..value_decoders import ValueDecodeError, decoder, shown
from .kafka_json import java_json, kafka_json, metadata_type_name

__all__ = ["Parsed", "PayloadParser", "control_json", "make_parser"]

DELETE = "<DELETE>"


@dataclass(frozen=True, slots=True)
class Parsed:
    """One record as a parser sees it.

    ``key_text``/``value_text``: what follows ``key:``/``payload:`` (None: not printed).
    ``key_json``/``value_json``: the same as JSON values. ``note``: why a part could not be
    decoded. ``problem``: damage to report (the dump's exit status becomes 1).
    """

    key_text: str | None
    value_text: str | None
    key_json: object = None
    value_json: object = None
    note: str | None = None
    problem: KafkalogError | None = None


class PayloadParser:
    """Base: the bytes as lenient UTF-8, as kafka-dump-log's default StringDecoder."""

    def parse(self, record: Record) -> Parsed:
        key = None if record.key is None else bytes(record.key).decode("utf-8", "replace")
        value = None if record.value is None else bytes(record.value).decode("utf-8", "replace")
        return Parsed(key, value, key, value)


class DecoderParser(PayloadParser):
    """``--key-decoder``/``--value-decoder``: one named decoder each (value_decoders.py)."""

    def __init__(self, key_decoder: str | None, value_decoder: str | None) -> None:
        self._names = (key_decoder, value_decoder)
        self._key = decoder(key_decoder) if key_decoder else None
        self._value = decoder(value_decoder) if value_decoder else None

    def parse(self, record: Record) -> Parsed:
        default = super().parse(record)
        parts: list[object] = [default.key_json, default.value_json]
        problems = []
        for i, (fn, data, what) in enumerate(
            ((self._key, record.key, "key"), (self._value, record.value, "value"))
        ):
            if fn is None or data is None:
                continue
            try:
                parts[i] = fn(data)
            except ValueDecodeError as e:
                parts[i] = None
                problems.append(f"{what} does not decode as {self._names[i]}: {e}")
        key, value = parts
        note = "; ".join(problems) or None
        return Parsed(
            None if key is None else shown(key),
            None if value is None else shown(value),
            key,
            value,
            note,
            None if note is None else InvalidRecordError(note, offset=record.offset),
        )


class _CoordinatorParser(PayloadParser):
    """The offsets and transaction log decoders: typed keys and versioned values."""

    def decode(self, key: bytes, value: bytes | None) -> tuple[DecodedMessage, DecodedMessage]:
        raise NotImplementedError

    def value_json(self, key: DecodedMessage, value: DecodedMessage, raw: bytes) -> object:
        raise NotImplementedError

    def parse(self, record: Record) -> Parsed:
        offset = record.offset
        if record.key is None:
            message = (
                f"Failed to decode message at offset {offset} using the specified decoder "
                "(message had a missing key)"
            )
            return Parsed(None, None, note=message, problem=InvalidRecordError(message))
        value_bytes = None if record.value is None else bytes(record.value)
        key, value = self.decode(bytes(record.key), value_bytes)
        if key.error is None and key.data is None:
            # As Kafka: a key of an unknown type is reported before the value is read.
            text = f"Unknown record type {key.api_key} at offset {offset}, skipping."
            return Parsed(text, None, note=text)
        failed = key.error or value.error
        if failed:
            text = f"Error at offset {offset}, skipping. {failed}"
            return Parsed(text, None, note=failed, problem=InvalidRecordError(failed))
        key_json = {"type": str(key.api_key), "data": dict(key.data)}
        if value_bytes is None:
            return Parsed(java_json(key_json), DELETE, key_json, None)
        if value.data is None:
            note = f"unknown version {value.version} of {value.kind} value"
            return Parsed(f"Error at offset {offset}, skipping. {note}", None, note=note)
        value_json = {
            "version": str(value.version),
            "data": self.value_json(key, value, value_bytes),
        }
        return Parsed(java_json(key_json), java_json(value_json), key_json, value_json)


class OffsetsParser(_CoordinatorParser):
    """``--offsets-decoder``: ``__consumer_offsets`` records (group coordinator)."""

    def decode(self, key: bytes, value: bytes | None) -> tuple[DecodedMessage, DecodedMessage]:
        decoded_key = decode_consumer_offsets_key(key)
        return decoded_key, decode_consumer_offsets_value(decoded_key, value)

    def value_json(self, key: DecodedMessage, value: DecodedMessage, raw: bytes) -> object:
        assert key.api_key is not None and value.data is not None
        schema = _offsets_value_schema(key.api_key)
        if schema is not group_schemas.GROUP_METADATA_VALUE:
            return kafka_json(schema, value.data, value.version)
        return _group_metadata_json(raw, value)


def _offsets_value_schema(record_type: int) -> Message:
    return offsets_module.consumer_offsets_value_schema(record_type)


def _group_metadata_json(raw: bytes, value: DecodedMessage) -> dict:
    """A classic group's value: members' protocol bytes as Kafka's JSON of the embedded
    subscription and assignment (each at its own version) when the protocol is "consumer"."""
    schema = group_schemas.GROUP_METADATA_VALUE
    try:
        plain, _ = read_message(schema, raw, 2, len(raw), value.version)
    except BYTE_ERRORS:  # the decoder read these bytes once already
        plain = value.data
    assert plain is not None
    out = kafka_json(schema, plain, value.version)
    if plain.get("protocolType") != "consumer":
        return out
    for member, member_json in zip(plain["members"], out["members"]):
        for name, decode, embedded in (
            ("subscription", decode_consumer_protocol_subscription,
             group_schemas.CONSUMER_PROTOCOL_SUBSCRIPTION),
            ("assignment", decode_consumer_protocol_assignment,
             group_schemas.CONSUMER_PROTOCOL_ASSIGNMENT),
        ):  # fmt: skip
            blob = member.get(name)
            if not isinstance(blob, bytes):
                continue
            decoded = decode(blob)
            # Kafka keeps the bytes when its reader fails, also for versions it does not know.
            if decoded.data is not None and decoded.version in embedded.valid:
                member_json[name] = kafka_json(embedded, decoded.data, decoded.version)
    return out


class TransactionLogParser(_CoordinatorParser):
    """``--transaction-log-decoder``: ``__transaction_state`` records."""

    def decode(self, key: bytes, value: bytes | None) -> tuple[DecodedMessage, DecodedMessage]:
        return decode_transaction_log_key(key), decode_transaction_log_value(value)

    def value_json(self, key: DecodedMessage, value: DecodedMessage, raw: bytes) -> object:
        assert value.data is not None
        out = kafka_json(TRANSACTION_LOG_VALUE, value.data, value.version)
        # Kafka 4.4 prints the state's name (TransactionState), 4.1-4.3 its number
        status = out.get("transactionStatus") if isinstance(out, dict) else None
        if status in TRANSACTION_STATUSES:
            out["transactionStatus"] = TRANSACTION_STATUSES[status]
        return out


class ClusterMetadataParser(PayloadParser):
    """``--cluster-metadata-decoder``: KRaft ``__cluster_metadata`` records (no keys)."""

    def parse(self, record: Record) -> Parsed:
        offset = record.offset
        if record.value is None:
            note = "a metadata record has a null value"
            problem = InvalidRecordError(note)
            return Parsed(None, f"Error at {offset}, skipping. {note}", note=note, problem=problem)
        decoded = decode_metadata_record(bytes(record.value))
        if decoded.error is not None:
            problem = InvalidRecordError(decoded.error)
            text = f"Error at {offset}, skipping. {decoded.error}"
            return Parsed(None, text, note=decoded.error, problem=problem)
        if decoded.data is None:
            if decoded.api_key is None:
                note = f"unknown frame version {decoded.frame_version}"
            elif decoded.kind == "unknown":
                note = f"unknown metadata record type {decoded.api_key}"
            else:
                note = f"unknown version {decoded.version} of {decoded.kind}Record"
            return Parsed(None, f"Error at {offset}, skipping. {note}", note=note)
        assert decoded.api_key is not None
        schema = metadata_module.metadata_record_schema(decoded.api_key)
        value_json = {
            "type": metadata_type_name(schema.name),
            "version": decoded.version,
            "data": kafka_json(schema, decoded.data, decoded.version),
        }
        return Parsed(None, java_json(value_json), None, value_json)


def make_parser(
    *,
    offsets: bool = False,
    transaction_log: bool = False,
    cluster_metadata: bool = False,
    key_decoder: str | None = None,
    value_decoder: str | None = None,
) -> PayloadParser:
    """The parser a command line asks for (at most one of the internal-topic decoders)."""
    if offsets:
        return OffsetsParser()
    if transaction_log:
        return TransactionLogParser()
    if cluster_metadata:
        return ClusterMetadataParser()
    if key_decoder or value_decoder:
        return DecoderParser(key_decoder, value_decoder)
    return PayloadParser()


# kafka-dump-log (4.1+) prints these control records as a label and the record's JSON.
_QUORUM_RECORDS: dict[int, tuple[str, Message]] = {
    ControlRecordType.LEADER_CHANGE: ("LeaderChange:", control_module.LEADER_CHANGE_MESSAGE),
    ControlRecordType.SNAPSHOT_HEADER: ("SnapshotHeader", control_module.SNAPSHOT_HEADER_RECORD),
    ControlRecordType.SNAPSHOT_FOOTER: ("SnapshotFooter", control_module.SNAPSHOT_FOOTER_RECORD),
    ControlRecordType.KRAFT_VERSION: ("KRaftVersion", control_module.KRAFT_VERSION_RECORD),
    ControlRecordType.KRAFT_VOTERS: ("KRaftVoters", control_module.VOTERS_RECORD),
}


def control_json(type_id: int, value: bytes | None) -> tuple[str, dict] | None:
    """``(label, Kafka's JSON)`` of a KRaft quorum control record, None for other types.

    Raises InvalidRecordError when the value does not decode (kafka-dump-log would crash)."""
    entry = _QUORUM_RECORDS.get(type_id)
    if entry is None:
        return None
    label, schema = entry
    decoded = decode_control_value(type_id, value)
    if decoded.error is not None or decoded.data is None:
        raise InvalidRecordError(
            f"{decoded.kind} control record does not decode: {decoded.error or 'no data'}"
        )
    # Kafka writes the record at the version its own "version" field holds.
    version = min(max(decoded.version, schema.valid.lo), schema.valid.hi)
    return label, kafka_json(schema, decoded.data, version)
