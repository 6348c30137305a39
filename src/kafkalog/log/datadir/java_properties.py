"""Java ``.properties`` text as java.util.Properties reads (load) and writes (store) it.

Kafka's meta.properties is written by ``Properties.store(writer, "")``::

    #
    #Wed Jul 10 11:13:46 CST 2024      <- java.util.Date.toString() of the write
    broker.id=0
    cluster.id=1PEpoQSRThK-PWVK_M7NCg
    version=0

Reading rules (Properties.load): lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading blanks
(space, tab, form feed) are skipped; blank lines and lines starting with ``#`` or ``!`` are
comments; a line ending in an odd number of backslashes continues on the next line (whose
leading blanks are skipped); the key ends at the first unescaped ``=``, ``:`` or blank, and one
``=``/``:`` with blanks around it separates it from the value; escapes are ``\\t \\n \\r \\f``,
``\\uXXXX`` and ``\\<any>`` = that character. A later key overrides an earlier one.

Writing rules (Properties.store): ``#<comment>``, ``#<date>``, then ``key=value`` lines; in keys
every space is escaped, in values only a leading one; ``\\ = : # !`` and ``\\t \\n \\r \\f`` are
escaped; we also escape non-ASCII as ``\\uXXXX`` (as ``store(OutputStream)`` does), so the bytes
are ASCII and read the same whether decoded as ISO-8859-1 (Properties.load(InputStream), what
Kafka reads with) or UTF-8. Keys are written sorted, as JDK 18+ does (older JDKs wrote hash
order, which is why Kafka-written files differ in key order: reading does not depend on it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from ..errors import CorruptCheckpointError

__all__ = ["java_date_string", "load_properties", "load_properties_with_lines", "store_properties"]

_LINE_END = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _trailing_backslashes(text: str) -> int:
    return len(text) - len(text.rstrip("\\"))


def _logical_lines(text: str) -> list[tuple[str, int]]:
    """(logical line, 1-based number of its first natural line), comments and blanks dropped."""
    natural = _LINE_END.split(text)
    result = []
    i = 0
    while i < len(natural):
        number = i + 1
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _trailing_backslashes(line) % 2 == 1:
            line = line[:-1]
            if i >= len(natural):  # a final backslash at end of input is dropped
                break
            line += natural[i].lstrip(_BLANKS)
            i += 1
        result.append((line, number))
    return result


def _split_key_value(line: str) -> tuple[str, str]:
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    backslash = False
    for pos, char in enumerate(line):
        if char in "=:" and not backslash:
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if char in _BLANKS and not backslash:
            key_end, value_start = pos, pos + 1
            break
        backslash = (not backslash) if char == "\\" else False
    while value_start < len(line):
        char = line[value_start]
        if char not in _BLANKS:
            if not has_separator and char in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str, *, path: str | None, line: int) -> str:
    if "\\" not in text:
        return text
    out = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        pos += 1
        if char != "\\":
            out.append(char)
            continue
        if pos >= len(text):
            break
        char = text[pos]
        pos += 1
        if char == "u":
            digits = text[pos : pos + 4]
            if not _HEX4.fullmatch(digits):
                raise CorruptCheckpointError(
                    f"malformed \\uxxxx encoding: \\u{digits!s}", path=path, line=line
                )
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(char, char))
    joined = "".join(out)
    # \uD83D\uDE00 (a UTF-16 pair, as Java writes characters beyond U+FFFF) becomes one character
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def load_properties_with_lines(
    text: str, *, path: str | None = None
) -> tuple[dict[str, str], dict[str, int]]:
    """(key -> value, key -> line number where it was last set), keys in first-seen order."""
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line, number in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, path=path, line=number)
        values[key] = _unescape(raw_value, path=path, line=number)
        lines[key] = number
    return values, lines


def load_properties(text: str, *, path: str | None = None) -> dict[str, str]:
    """Properties.load of ``text``; a malformed ``\\u`` escape raises CorruptCheckpointError."""
    return load_properties_with_lines(text, path=path)[0]


def _escape(text: str, *, escape_space: bool) -> str:
    out = []
    for pos, char in enumerate(text):
        if char == " ":
            out.append("\\ " if pos == 0 or escape_space else " ")
        elif char in "\\=:#!":
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif " " < char <= "~":
            out.append(char)
        else:  # control or non-ASCII
            out.append(_unicode_escape(char))
    return "".join(out)


def java_date_string(seconds: float | None = None) -> str:
    """java.util.Date.toString() in local time: ``Wed Jul 10 11:13:46 CST 2024``."""
    t = time.localtime(seconds)
    zone = t.tm_zone or time.strftime("%Z", t)
    return (
        f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} {zone} {t.tm_year}"
    )


def store_properties(
    props: Mapping[str, str],
    *,
    comment: str | None = "",
    date: str | None = None,
    sort_keys: bool = True,
) -> str:
    """Properties.store text: ``#<comment>`` (omitted when None), ``#<date>`` (now when None),
    then ``key=value`` lines, sorted by key unless ``sort_keys`` is False (mapping order)."""
    out = []
    for header in (comment, java_date_string() if date is None else date):
        if header is None:
            continue
        if "\n" in header or "\r" in header:
            raise ValueError(f"comment line {header!r} contains a line end")
        out.append("#" + _escape_comment(header))
    keys = sorted(props) if sort_keys else list(props)
    for key in keys:
        out.append(f"{_escape(key, escape_space=True)}={_escape(props[key], escape_space=False)}")
    return "\n".join(out) + "\n"


def _unicode_escape(char: str) -> str:
    """``\\uXXXX`` per UTF-16 code unit, as Java sees characters beyond U+FFFF."""
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2))


def _escape_comment(text: str) -> str:
    return "".join(c if " " <= c <= "~" or c == "\t" else _unicode_escape(c) for c in text)
