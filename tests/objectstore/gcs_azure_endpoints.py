"""Real Google Cloud Storage and Azure Blob Storage endpoints on loopback for the object-storage
tests: fake-gcs-server (built with ``go install`` from its Go module) and Azurite (installed with
``npm install``), each installed once per machine and version into the kafkalog cache
(``${KAFKALOG_CACHE:-~/.cache/kafkalog}``), started on a free port, with the SDKs' environment
pointed at it. Without go or npm the tests skip, saying so."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

FAKE_GCS_SERVER = "github.com/fsouza/fake-gcs-server"
FAKE_GCS_VERSION = "v1.56.1"
AZURITE_VERSION = "3.37.0"
# Azurite's one account and its key, as Azurite's documentation publishes them.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
INSTALL_TIMEOUT = 900  # seconds: a first build of fake-gcs-server takes one to two minutes
START_TIMEOUT = 60


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("KAFKALOG_CACHE") or Path(base) / "kafkalog")


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One installer at a time per cache (test processes run side by side)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_install(command: list[str], env: dict[str, str], what: str) -> None:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"installing {what} took more than {INSTALL_TIMEOUT} s: {' '.join(command)}")
    if done.returncode != 0:
        pytest.fail(f"installing {what} failed ({' '.join(command)}):\n{done.stderr[-3000:]}")


def fake_gcs_server() -> Path:
    """The fake-gcs-server binary, built once with ``go install`` into the cache's ``bin/``."""
    binary = cache_dir() / "bin" / f"fake-gcs-server-{FAKE_GCS_VERSION}"
    if binary.is_file():
        return binary
    go = shutil.which("go") or next(
        (g for g in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(g, os.X_OK)), None
    )
    if go is None:
        pytest.skip("fake-gcs-server (the GCS emulator) is built with Go: no go on PATH")
    with _locked("fake-gcs-server"):
        if binary.is_file():
            return binary
        binary.parent.mkdir(parents=True, exist_ok=True)
        # The module and build caches are the build's own, removed after it: only the binary
        # (50 MB) stays, not the 1.2 GB of sources and objects it was built from.
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="go-build-") as scratch:
            env = {**os.environ, "GOBIN": f"{scratch}/bin", "GOMODCACHE": f"{scratch}/mod",
                   "GOCACHE": f"{scratch}/cache", "GOFLAGS": "-modcacherw -buildvcs=false",
                   "CGO_ENABLED": "0"}  # fmt: skip
            _run_install([go, "install", f"{FAKE_GCS_SERVER}@{FAKE_GCS_VERSION}"], env,
                         f"fake-gcs-server {FAKE_GCS_VERSION}")  # fmt: skip
            os.replace(f"{scratch}/bin/fake-gcs-server", binary)
    return binary


def azurite_blob() -> Path:
    """Azurite's blob service, installed once with ``npm install`` into the cache."""
    prefix = cache_dir() / f"azurite-{AZURITE_VERSION}"
    script = prefix / "node_modules" / ".bin" / "azurite-blob"
    if script.is_file():
        return script
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("Azurite (the Azure Storage emulator) is an npm package: no node/npm on PATH")
    with _locked("azurite"):
        if script.is_file():
            return script
        scratch = tempfile.mkdtemp(dir=cache_dir(), prefix="azurite-")
        try:
            _run_install(
                [npm, "install", "--prefix", scratch, "--no-audit", "--no-fund",
                 "--loglevel", "error", f"azurite@{AZURITE_VERSION}"],
                dict(os.environ), f"azurite {AZURITE_VERSION}",
            )  # fmt: skip
            shutil.rmtree(prefix, ignore_errors=True)
            os.replace(scratch, prefix)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return script


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _server(command: list[str], port: int, log: Path) -> Iterator[subprocess.Popen]:
    """``command`` running until it accepts connections on ``port``; stopped at the end."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"{command[0]} exited ({process.returncode}): {log.read_text()[-2000:]}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{command[0]} did not listen on port {port} in {START_TIMEOUT} s")
                time.sleep(0.1)
        yield process
    finally:
        # Killed: both keep everything in memory, and a graceful stop waits for the clients'
        # idle keep-alive connections to close.
        process.kill()
        process.wait()


class Gcs:
    """fake-gcs-server at ``endpoint`` (``http://127.0.0.1:PORT``): buckets and uploads through
    GCS's JSON API."""

    scheme = "gs"

    def __init__(self, endpoint: str, bucket: str) -> None:
        self.endpoint, self.bucket = endpoint, bucket

    def _call(self, path: str, data: bytes, content_type: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}{path}", data=data, method="POST",
                                         headers={"Content-Type": content_type})  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()

    def create_bucket(self) -> None:
        body = json.dumps({"name": self.bucket}).encode()
        self._call("/storage/v1/b?project=kafkalog-tests", body, "application/json")

    def put(self, name: str, data: bytes) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        self._call(f"/upload/storage/v1/b/{self.bucket}/o?{query}", data,
                   "application/octet-stream")  # fmt: skip

    def url(self, *parts: str) -> str:
        return "/".join([f"gs://{self.bucket}", *parts])


class Azure:
    """Azurite's blob service at ``endpoint`` (``http://127.0.0.1:PORT/devstoreaccount1``):
    containers and uploads through Arrow's Azure filesystem, with Azurite's account key."""

    scheme = "abfss"

    def __init__(self, endpoint: str, container: str) -> None:
        from pyarrow import fs

        self.endpoint, self.container = endpoint, container
        authority = urllib.parse.urlsplit(endpoint).netloc
        self._fs = fs.AzureFileSystem(
            AZURITE_ACCOUNT, account_key=AZURITE_KEY, blob_storage_authority=authority,
            dfs_storage_authority=authority, blob_storage_scheme="http", dfs_storage_scheme="http",
        )  # fmt: skip

    def create_bucket(self) -> None:
        self._fs.create_dir(self.container)

    def put(self, name: str, data: bytes) -> None:
        with self._fs.open_output_stream(f"{self.container}/{name}") as out:
            out.write(data)

    def url(self, *parts: str) -> str:
        base = f"abfss://{self.container}@{AZURITE_ACCOUNT}.dfs.core.windows.net"
        return "/".join([base, *parts])


def upload(store: Gcs | Azure, root: Path, prefix: str) -> int:
    """Upload every regular file under ``root`` under ``prefix``, as a copy of a directory is
    uploaded (objects only, no directory markers); their count."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: store.put(f"{prefix}/{p.relative_to(root).as_posix()}",
                                          p.read_bytes()), files))  # fmt: skip
    return len(files)


_SDK_VARIABLES = (
    "STORAGE_EMULATOR_HOST", "CLOUD_STORAGE_EMULATOR_ENDPOINT", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
)  # fmt: skip


@contextlib.contextmanager
def fake_gcs(bucket: str, workdir: Path, **env: str) -> Iterator[Gcs]:
    """fake-gcs-server on loopback holding an empty ``bucket``, with ``STORAGE_EMULATOR_HOST``
    (Google's clients' emulator variable) pointed at it (``env`` besides)."""
    binary = fake_gcs_server()
    port = free_port()
    command = [str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
               "-public-host", f"127.0.0.1:{port}", "-backend", "memory",
               "-log-level", "error"]  # fmt: skip
    with (
        _server(command, port, workdir / "fake-gcs-server.log"),
        pytest.MonkeyPatch.context() as mp,
    ):
        for name in _SDK_VARIABLES:
            mp.delenv(name, raising=False)
        store = Gcs(f"http://127.0.0.1:{port}", bucket)
        for name, value in {"STORAGE_EMULATOR_HOST": store.endpoint, **env}.items():
            mp.setenv(name, value)
        store.create_bucket()
        yield store


@contextlib.contextmanager
def azurite(container: str, workdir: Path, **env: str) -> Iterator[Azure]:
    """Azurite's blob service on loopback holding an empty ``container``, with
    ``AZURE_STORAGE_CONNECTION_STRING`` (the form Azurite's documentation gives) pointed at it
    (``env`` besides)."""
    script = azurite_blob()
    port = free_port()
    command = [str(script), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent",
               "--inMemoryPersistence", "--skipApiVersionCheck"]  # fmt: skip
    with _server(command, port, workdir / "azurite.log"), pytest.MonkeyPatch.context() as mp:
        for name in _SDK_VARIABLES:
            mp.delenv(name, raising=False)
        endpoint = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
        connection = (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
                      f"AccountKey={AZURITE_KEY};BlobEndpoint={endpoint};")  # fmt: skip
        for name, value in {"AZURE_STORAGE_CONNECTION_STRING": connection, **env}.items():
            mp.setenv(name, value)
        store = Azure(endpoint, container)
        store.create_bucket()
        yield store
