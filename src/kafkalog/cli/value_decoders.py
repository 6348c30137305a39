"""How record keys and values are shown: one named decoder per user choice, shared by every command.

``dump --key-decoder/--value-decoder`` and ``consume`` use the same names, so a user learns them
once. A decoder turns the raw bytes (``None`` for a null key or value) into something printable or
JSON-serialisable; bytes that do not fit the chosen decoder raise ``ValueDecodeError`` naming why,
so a command can report the offset instead of printing garbage.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import TypeVar

_Fn = TypeVar("_Fn")


class ValueDecodeError(ValueError):
    """Raised when bytes do not fit the chosen decoder (the caller adds file and offset)."""


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueDecodeError(f"not UTF-8 (byte {e.start} is {data[e.start]:#04x})") from None


def _hex(data: bytes) -> str:
    return data.hex()


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _json(data: bytes) -> object:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueDecodeError(f"not JSON ({e})") from None


def _fixed_int(width: int) -> Callable[[bytes], int]:
    def decode(data: bytes) -> int:
        if len(data) != width:
            raise ValueDecodeError(f"int{width * 8} needs {width} bytes, found {len(data)}")
        return int.from_bytes(data, "big", signed=True)

    return decode


_RAW: dict[str, Callable[[bytes], object]] = {
    "utf8": _utf8,
    "hex": _hex,
    "base64": _base64,
    "json": _json,
    "int32": _fixed_int(4),
    "int64": _fixed_int(8),
}


def _null_safe(decode: Callable[[bytes], object]) -> Callable[[bytes | None], object]:
    def run(data: bytes | None) -> object:
        return None if data is None else decode(bytes(data))

    return run


DECODERS: dict[str, Callable[[bytes | None], object]] = {
    name: _null_safe(fn) for name, fn in _RAW.items()
}
"""Decoder name -> function; ``None`` (a null key or value) always decodes to ``None``."""

DECODER_NAMES: tuple[str, ...] = tuple(DECODERS)


def decoder(name: str) -> Callable[[bytes | None], object]:
    """The decoder called ``name``; ``ValueError`` listing the choices for an unknown name."""
    return _chosen(DECODERS, name, "decoder")


def _chosen(table: dict[str, _Fn], name: str, what: str) -> _Fn:
    """``table[name]``; ``ValueError`` naming the unknown ``what`` and the decoder names."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(
            f"unknown {what} {name!r}: choose one of {', '.join(DECODER_NAMES)}"
        ) from None


# -- the way back: text produced by a decoder -> the original bytes (``produce`` reads JSON lines)
class ValueEncodeError(ValueError):
    """Raised when a value does not fit the encoding it claims (the caller adds the line)."""


def _encode_utf8(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueEncodeError(f"utf8 needs a string, not {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueEncodeError(f"not encodable as UTF-8 ({e.reason})") from None


def _encode_hex(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueEncodeError(f"hex needs a string, not {type(value).__name__}")
    try:
        return bytes.fromhex(value)
    except ValueError as e:
        raise ValueEncodeError(f"not hex ({e})") from None


def _encode_base64(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueEncodeError(f"base64 needs a string, not {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as e:
        raise ValueEncodeError(f"not base64 ({e})") from None


def _encode_json(value: object) -> bytes:
    return compact_json(value).encode("utf-8")


def compact_json(value: object) -> str:
    """JSON text without spaces after separators: what every command prints for JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def shown(value: object) -> str:
    """A decoded key or value as text: strings as they are, anything else as compact JSON."""
    return value if isinstance(value, str) else compact_json(value)


def _encode_int(width: int) -> Callable[[object], bytes]:
    def encode(value: object) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueEncodeError(f"int{width * 8} needs an integer, not {value!r}")
        try:
            return value.to_bytes(width, "big", signed=True)
        except OverflowError:
            raise ValueEncodeError(f"{value} does not fit int{width * 8}") from None

    return encode


ENCODERS: dict[str, Callable[[object], bytes]] = {
    "utf8": _encode_utf8,
    "hex": _encode_hex,
    "base64": _encode_base64,
    "json": _encode_json,
    "int32": _encode_int(4),
    "int64": _encode_int(8),
}
"""Decoder name -> its inverse: ``ENCODERS[n](DECODERS[n](b)) == b`` for every decoder except
``json``, which gives back compact JSON (the same bytes only when the original was compact)."""


def encoder(name: str) -> Callable[[object], bytes]:
    """The inverse of decoder ``name``; ``ValueError`` listing the choices for an unknown name."""
    return _chosen(ENCODERS, name, "encoding")
