"""Object-storage URLs on the command line (``s3://bucket/prefix``, docs/object-storage.md).

The commands that only read (dump, verify, stats, transactions, consume, export) take a URL
wherever they take a path, and print what they print for a local copy of the same bytes. The
commands that change files (recover, rebuild-index, compact, retention --apply, produce,
make-bootable) refuse one as a usage error: object storage holds copies that the commands never
write, and a URL taken for a local path would create a directory named ``s3:``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import UsageError

__all__ = ["check_urls", "is_url", "refuse_urls"]


def is_url(path: object) -> bool:
    """Whether ``path`` names object storage rather than a local file."""
    from ..log.storage import is_remote

    return is_remote(path)


def check_urls(paths: Iterable[object]) -> None:
    """Raise UsageError for a URL that cannot be read as given (credentials or parameters in
    it, an unknown scheme, no bucket), before anything is read."""
    from ..log.storage.remote_storage import split_url

    for path in paths:
        if is_url(path):
            try:
                split_url(str(path))
            except ValueError as e:
                raise UsageError(str(e)) from None


def refuse_urls(paths: Iterable[object], *, does: str) -> None:
    """Raise UsageError naming the first URL among ``paths``: the command ``does`` something
    the command line never does to object storage (it only reads it)."""
    for path in paths:
        if is_url(path):
            raise UsageError(
                f"{path}: this command {does}, and the command line only reads object "
                f"storage; copy the directory to a local disk first (dump, verify, stats, "
                f"transactions, consume and export read URLs)"
            )
