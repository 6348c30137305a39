"""Google Cloud Storage through ``pyarrow.fs.GcsFileSystem``: a bounded retry window, an
emulator from the environment, and directory listings of data directories uploaded without
directory marker objects."""

from __future__ import annotations

import functools
from urllib.parse import urlsplit

__all__ = ["GCS_RETRY_SECONDS", "gcs_filesystem"]

GCS_RETRY_SECONDS = 5  # google-cloud-cpp's retry window per call (its default is 15 minutes)


def gcs_filesystem(emulator: str | None):
    """GCS with a bounded retry window; an emulator (``http://host:port`` or ``host:port``, as
    Google's clients take it) is reached without credentials, as those clients do."""
    from datetime import timedelta

    from pyarrow import fs

    retry = timedelta(seconds=GCS_RETRY_SECONDS)
    if emulator:
        parts = urlsplit(emulator if "://" in emulator else f"http://{emulator}")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the GCS emulator endpoint {emulator!r} is not http(s)://HOST:PORT")
        gcs = fs.GcsFileSystem(anonymous=True, scheme=parts.scheme,
                               endpoint_override=parts.netloc, retry_time_limit=retry)  # fmt: skip
    else:
        gcs = fs.GcsFileSystem(retry_time_limit=retry)
    return fs.PyFileSystem(_gcs_listing()(gcs))


@functools.lru_cache(maxsize=1)
def _gcs_listing() -> type:
    """A filesystem handler that passes every call to a ``GcsFileSystem`` but lists a directory
    from the objects under its prefix: Arrow's own listing of one level shows only objects and
    directory marker objects, so the partition directories of a data directory uploaded without
    markers (``gcloud storage cp -r``, any SDK's upload) would not be there."""
    from pyarrow import fs

    class GcsListing(fs.FileSystemHandler):
        def __init__(self, gcs) -> None:
            self.gcs = gcs

        def get_type_name(self) -> str:
            return "gcs"

        def equals(self, other) -> bool:
            return isinstance(other, GcsListing) and self.gcs.equals(other.gcs)

        def normalize_path(self, path):
            return self.gcs.normalize_path(path)

        def get_file_info(self, paths):
            return self.gcs.get_file_info(paths)

        def get_file_info_selector(self, selector):
            if selector.recursive:
                return self.gcs.get_file_info(selector)
            deep = fs.FileSelector(selector.base_dir, allow_not_found=selector.allow_not_found,
                                   recursive=True)  # fmt: skip
            base = selector.base_dir.rstrip("/") + "/"
            children: dict = {}
            for info in self.gcs.get_file_info(deep):
                name, slash, _ = info.path[len(base) :].partition("/")
                if not info.path.startswith(base) or not name:
                    continue
                if slash or info.type == fs.FileType.Directory:
                    children[name] = fs.FileInfo(base + name, fs.FileType.Directory)
                else:
                    children.setdefault(name, info)
            return list(children.values())

        def create_dir(self, path, recursive):
            self.gcs.create_dir(path, recursive=recursive)

        def delete_dir(self, path):
            self.gcs.delete_dir(path)

        def delete_dir_contents(self, path, missing_dir_ok=False):
            self.gcs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

        def delete_root_dir_contents(self):
            self.gcs.delete_dir_contents("/", accept_root_dir=True)

        def delete_file(self, path):
            self.gcs.delete_file(path)

        def move(self, src, dest):
            self.gcs.move(src, dest)

        def copy_file(self, src, dest):
            self.gcs.copy_file(src, dest)

        def open_input_stream(self, path):
            return self.gcs.open_input_stream(path)

        def open_input_file(self, path):
            return self.gcs.open_input_file(path)

        def open_output_stream(self, path, metadata):
            return self.gcs.open_output_stream(path, metadata=metadata)

        def open_append_stream(self, path, metadata):
            return self.gcs.open_append_stream(path, metadata=metadata)

    return GcsListing
