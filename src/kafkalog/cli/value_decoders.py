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

from ..errors import ValueDecodeError, ValueEncodeError
from .output import compact_json

_Fn = TypeVar("_Fn")


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


# -- the way back: text produced by a decoder -> the original bytes (``produce`` reads JSON lines)
def _text_encoder(
    name: str,
    convert: Callable[[str], bytes],
    failed: str,
    reason: Callable[[ValueError], object] = str,
) -> Callable[[object], bytes]:
    """The inverse of a decoder that shows bytes as text: ``convert`` the string back; a string
    it refuses is ``failed`` (its ``reason`` in brackets), anything else is no string."""

    def encode(value: object) -> bytes:
        if not isinstance(value, str):
            raise ValueEncodeError(f"{name} needs a string, not {type(value).__name__}")
        try:
            return convert(value)
        except ValueError as e:  # UnicodeEncodeError, binascii.Error, fromhex's ValueError
            raise ValueEncodeError(f"{failed} ({reason(e)})") from None

    return encode


def _unicode_reason(error: ValueError) -> object:
    return error.reason if isinstance(error, UnicodeError) else error


def _strict_b64decode(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _encode_json(value: object) -> bytes:
    return compact_json(value).encode("utf-8")


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


# Each decoder and its inverse, by the name users choose.
_CODECS: dict[str, tuple[Callable[[bytes], object], Callable[[object], bytes]]] = {
    "utf8": (_utf8, _text_encoder("utf8", str.encode, "not encodable as UTF-8", _unicode_reason)),
    "hex": (_hex, _text_encoder("hex", bytes.fromhex, "not hex")),
    "base64": (_base64, _text_encoder("base64", _strict_b64decode, "not base64")),
    "json": (_json, _encode_json),
    "int32": (_fixed_int(4), _encode_int(4)),
    "int64": (_fixed_int(8), _encode_int(8)),
}


def _null_safe(decode: Callable[[bytes], object]) -> Callable[[bytes | None], object]:
    def run(data: bytes | None) -> object:
        return None if data is None else decode(bytes(data))

    return run


DECODERS: dict[str, Callable[[bytes | None], object]] = {
    name: _null_safe(decode) for name, (decode, _) in _CODECS.items()
}
"""Decoder name -> function; ``None`` (a null key or value) always decodes to ``None``."""

ENCODERS: dict[str, Callable[[object], bytes]] = {
    name: encode for name, (_, encode) in _CODECS.items()
}
"""Decoder name -> its inverse: ``ENCODERS[n](DECODERS[n](b)) == b`` for every decoder except
``json``, which gives back compact JSON (the same bytes only when the original was compact)."""

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


def encoder(name: str) -> Callable[[object], bytes]:
    """The inverse of decoder ``name``; ``ValueError`` listing the choices for an unknown name."""
    return _chosen(ENCODERS, name, "encoding")
