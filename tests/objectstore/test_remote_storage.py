"""Storage URLs without a server: which are remote, what is refused, how failures read."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from kafkalog.log.storage import RemoteStorageError, as_path, is_remote
from kafkalog.log.storage.remote_storage import retrying, split_url, transient


@pytest.mark.parametrize(
    ("path", "remote"),
    [("s3://b/d", True), ("gs://b/d", True), ("/var/lib/kafka", False),
     ("file:///var/lib/kafka", False), (Path("/x"), False), ("relative/dir", False)],
)  # fmt: skip
def test_is_remote(path, remote):
    assert is_remote(path) is remote
    assert isinstance(as_path(path), Path) is not remote


@pytest.mark.parametrize(
    "url",
    ["s3://key:secret@bucket/d", "s3://key@bucket/d", "s3://bucket/d?access_key=x",
     "s3://bucket/d?endpoint_override=http://x", "ftp://host/d", "s3:///d"],
)  # fmt: skip
def test_refused_urls(url):
    with pytest.raises(ValueError) as e:
        split_url(url)
    assert "secret" not in str(e.value)


def test_the_error_names_the_object_and_position_and_pickles():
    error = RemoteStorageError("reading 10 bytes failed", path="s3://b/t-0/0.log", position=42)
    assert str(error) == "s3://b/t-0/0.log, position 42: reading 10 bytes failed"
    again = pickle.loads(pickle.dumps(error))
    assert (again.path, again.position, str(again)) == (error.path, 42, str(error))
    assert isinstance(again, OSError)


def test_retries_are_bounded_and_refusals_are_not_retried():
    calls = []

    def flaky():
        calls.append(1)
        raise OSError("AWS Error NETWORK_CONNECTION: connection reset")

    with pytest.raises(RemoteStorageError, match="after 3 attempts") as e:
        retrying(flaky, url="s3://b/o", what="reading", position=7, attempts=3)
    assert len(calls) == 3 and e.value.position == 7
    assert not transient(OSError("AWS Error ACCESS_DENIED during GetObject"))
    assert not transient(FileNotFoundError("gone"))
    with pytest.raises(FileNotFoundError, match="s3://b/o"):
        retrying(lambda: (_ for _ in ()).throw(FileNotFoundError()), url="s3://b/o", what="x")
