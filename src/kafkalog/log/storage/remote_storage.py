"""Which filesystem serves a URL, and how its calls are retried and their failures named.

Each store's filesystem is built here from the environment its own SDK reads, with bounded
retries and timeouts (a dropped connection or a throttling answer is retried; a dead endpoint
fails in bounded time instead of hanging a task):

- ``s3://bucket/prefix``: ``pyarrow.fs.S3FileSystem``; credentials from the AWS SDK's chain
  (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and
  the shared config files, instance and container roles), the endpoint from
  ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, the region from ``AWS_REGION`` or
  ``AWS_DEFAULT_REGION``.
- ``gs://bucket/prefix``: ``pyarrow.fs.GcsFileSystem``; Google's application default
  credentials, or an emulator without credentials at ``CLOUD_STORAGE_EMULATOR_ENDPOINT`` (what
  google-cloud-cpp reads) or ``STORAGE_EMULATOR_HOST`` (what Google's Python, Go and Java
  clients read). Arrow lists a GCS "directory" from its objects and marker objects only, not
  from the prefixes GCS returns beside them, so a directory uploaded without markers would list
  empty: listings here are made from the objects under the prefix (:func:`_gcs_listing`).
- ``abfss://container@account.dfs.core.windows.net/prefix``: ``pyarrow.fs.AzureFileSystem`` for
  ``account``; ``AZURE_STORAGE_CONNECTION_STRING`` (its account key or shared access signature,
  and its ``BlobEndpoint``/``DfsEndpoint`` for an emulator such as Azurite or another cloud),
  else ``AZURE_STORAGE_ACCOUNT_KEY`` or ``AZURE_STORAGE_SAS_TOKEN``, else Azure's default
  credential chain.
- ``hdfs://``: ``pyarrow.fs.FileSystem.from_uri`` with the Hadoop client's configuration.

A URL holds no credentials and no parameters (both are refused): it travels in plans, logs and
errors, and to every executor, which finds the same environment.

Every call goes through :func:`retrying`: transient failures (an ``OSError`` that is not a
missing object or a refusal) are tried again a bounded number of times with a growing pause,
on top of the SDK's own retries; what still fails is a :class:`RemoteStorageError` naming the
object's URL and the byte position, as a local file's errors name its path and position.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import threading
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from ...errors import RemoteStorageError
from .azure import azure_account, azure_filesystem, azure_settings
from .gcs import gcs_filesystem

__all__ = [
    "ATTEMPTS",
    "RemoteStorageError",
    "filesystem_for",
    "missing_object",
    "retrying",
    "split_url",
]

T = TypeVar("T")
_SIGNATURE = re.compile(r"(\bsig=)[^&\s'\"]+", re.IGNORECASE)

# Our attempts per call (each one the SDK's own attempts): bounded, whatever the environment.
_configured = os.environ.get("KAFKALOG_REMOTE_ATTEMPTS", "").strip()
ATTEMPTS = max(1, min(20, int(_configured))) if _configured.isdigit() else 4
SDK_ATTEMPTS = 3
FIRST_PAUSE = 0.05  # seconds; doubled after each failed attempt, at most MAX_PAUSE
MAX_PAUSE = 1.0
CONNECT_TIMEOUT = 5.0
REQUEST_TIMEOUT = 30.0
SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")
_CREDENTIALS_FROM = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the SDK's config files",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS, the metadata server",
    "abfs": "AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT_KEY, Azure's credential chain",
    "hdfs": "the Hadoop client's configuration and Kerberos ticket cache",
}
_ENDPOINTS_FROM = {
    "s3": "AWS_ENDPOINT_URL, AWS_REGION",
    "gs": "STORAGE_EMULATOR_HOST, CLOUD_STORAGE_EMULATOR_ENDPOINT",
    "abfs": "AZURE_STORAGE_CONNECTION_STRING's BlobEndpoint",
    "hdfs": "the Hadoop client's configuration",
}


def _family(scheme: str) -> str:
    return {"gcs": "gs", "abfss": "abfs", "viewfs": "hdfs"}.get(scheme, scheme)


def split_url(url: str) -> tuple[str, str, str, str]:
    """(scheme, authority, path without slashes at the ends, query) of a storage URL; refuses
    credentials in it (they would be logged and planned with it)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ValueError(f"unsupported storage URL scheme {scheme!r} (supported: {SCHEMES})")
    family = _family(scheme)
    # A key holding "/" ends the authority early (gs://id:se/cret@bucket/...): any ":" where a
    # bucket, a container or a numeric port stands is taken for credentials too.
    port = parts.netloc.rpartition("@")[2].rpartition(":")[2]
    if (
        parts.password is not None
        or (family in ("s3", "gs") and "@" in parts.netloc)
        or (":" in parts.netloc and (family != "hdfs" or not port.isdigit()))
    ):
        raise ValueError(
            f"credentials in a storage URL ({scheme}://...) are refused: "
            f"a URL is written into plans, logs and errors; give them through the environment "
            f"({_CREDENTIALS_FROM[family]})"
        )
    if parts.query or parts.fragment:
        raise ValueError(
            f"parameters in a storage URL ({scheme}://{parts.hostname or ''}/...?...) are not "
            f"supported: set the endpoint in the environment ({_ENDPOINTS_FROM[family]}) or the "
            f"SDK's config files"
        )
    if not parts.netloc:
        raise ValueError(f"storage URL {scheme}://{parts.path} names no bucket or host")
    if family == "abfs":
        azure_account(scheme, parts.netloc)
    return scheme, parts.netloc, parts.path.strip("/"), ""


_lock = threading.Lock()


@functools.lru_cache(maxsize=64)
def _filesystem(scheme: str, authority: str, environment: tuple):
    from pyarrow import fs

    family = _family(scheme)
    if family == "s3":
        endpoint, region = environment
        kwargs: dict = {
            "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=SDK_ATTEMPTS),
            "connect_timeout": CONNECT_TIMEOUT,
            "request_timeout": REQUEST_TIMEOUT,
        }
        if endpoint:
            kwargs["endpoint_override"] = endpoint
        if region:
            kwargs["region"] = region
        return fs.S3FileSystem(**kwargs)
    if family == "gs":
        return gcs_filesystem(environment[0])
    if family == "abfs":
        return azure_filesystem(*environment)
    filesystem, _ = fs.FileSystem.from_uri(f"{scheme}://{authority}/")
    return filesystem


def _environment(scheme: str, authority: str) -> tuple:
    """What of the environment a filesystem is built from (a new endpoint or credential: a
    new filesystem)."""
    env = os.environ
    family = _family(scheme)
    if family == "s3":
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        return endpoint, env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if family == "gs":
        emulator = env.get("CLOUD_STORAGE_EMULATOR_ENDPOINT") or env.get("STORAGE_EMULATOR_HOST")
        return emulator or None, env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if family == "abfs":
        return azure_settings(scheme, authority, env)
    return ()


def filesystem_for(url: str) -> tuple[object, str, str]:
    """(the ``pyarrow.fs`` filesystem, the path in it, the URL to show) of a storage URL;
    filesystems are shared by URLs of the same scheme, authority and environment."""
    scheme, authority, path, _ = split_url(url)
    try:
        with _lock:
            filesystem = _filesystem(scheme, authority, _environment(scheme, authority))
    except (OSError, ImportError, RuntimeError, ValueError) as e:  # the SDKs', e.g. HDFS's
        needs = " (hdfs:// needs Hadoop's client: libjvm and libhdfs)" if scheme == "hdfs" else ""
        raise RemoteStorageError(
            f"cannot open {scheme}:// storage{needs}: {_short(e)}", path=url
        ) from None
    if _family(scheme) in ("s3", "gs"):
        fs_path = f"{authority}/{path}" if path else authority
    elif _family(scheme) == "abfs":  # container@account.dfs.core.windows.net
        container = authority.rpartition("@")[0]
        fs_path = f"{container}/{path}" if path else container
    else:
        fs_path = f"/{path}"
    shown = f"{scheme}://{authority}/{path}" if path else f"{scheme}://{authority}"
    return filesystem, fs_path.rstrip("/"), shown


def missing_object(url: str) -> FileNotFoundError:
    """What a missing object or prefix raises: a missing local file's error, naming the URL
    (so that a command says the same words for both)."""
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), url)


def transient(error: BaseException) -> bool:
    """Whether a failed call may succeed when tried again (a dropped connection, a timeout, a
    throttling answer), rather than never (a missing object, access refused, a bad bucket)."""
    if not isinstance(error, OSError) or isinstance(
        error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
    ):
        return False
    text = str(error).upper()
    return not any(word in text for word in _REFUSALS)


# What S3 (the AWS SDK's error names), GCS (google-cloud-cpp's status codes) and Azure (its
# error codes) answer when trying again cannot help.
_REFUSALS = (
    "ACCESS_DENIED", "ACCESSDENIED", "NO_SUCH_BUCKET", "NOSUCHBUCKET", "INVALID_ACCESS_KEY",
    "SIGNATURE_DOES_NOT_MATCH", "FORBIDDEN", "PERMISSION_DENIED", "UNAUTHENTICATED",
    "AUTHORIZATIONFAILURE", "AUTHENTICATIONFAILED", "AUTHORIZATIONPERMISSIONMISMATCH",
    "INVALIDAUTHENTICATIONINFO", "CONTAINERNOTFOUND", "INVALIDRESOURCENAME", "ACCOUNTISDISABLED",
)  # fmt: skip


def retrying(
    call: Callable[[], T],
    *,
    url: str,
    what: str,
    position: int | None = None,
    attempts: int | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """``call()``, tried again while it fails transiently, at most ``attempts`` times; a
    missing object stays FileNotFoundError (naming ``url``), anything else that fails is
    :class:`RemoteStorageError` saying ``what`` was done, where. ``on_retry`` runs before each
    new attempt (to reopen a stream)."""
    attempts = ATTEMPTS if attempts is None else attempts
    pause = FIRST_PAUSE
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except FileNotFoundError:
            raise missing_object(url) from None
        except RemoteStorageError:
            raise
        except (OSError, ValueError) as e:
            if attempt == attempts or not transient(e):
                tried = f" after {attempt} attempts" if attempt > 1 else ""
                raise RemoteStorageError(
                    f"{what} failed{tried}: {_short(e)}", path=url, position=position
                ) from None
        time.sleep(pause)
        pause = min(MAX_PAUSE, pause * 2)
        if on_retry is not None:
            try:
                on_retry()
            except OSError:
                pass
    raise AssertionError("unreachable")


def _short(error: BaseException) -> str:
    """The error's text on one line, short, with any shared access signature in it blanked (an
    SDK's message may quote a request URL, which carries Azure's SAS token)."""
    text = _SIGNATURE.sub(r"\1...", " ".join(str(error).split()))
    return text if len(text) <= 300 else text[:297] + "..."
