"""``kafkalog serve`` with TLS and SASL, driven by two independent clients: librdkafka
(confluent_kafka) and Kafka's own Java client (kafka-it's RefProducer/RefConsumer, through
tests/apache_kafka's ``kafka_dist``; those cases skip without Java or the Kafka jars).

One broker serves PLAINTEXT (``--listen``), SSL, SASL_PLAINTEXT and SASL_SSL listeners; a second
requires client certificates (mutual TLS). Certificates (a CA, a server certificate for
127.0.0.1/localhost, a client certificate) are made with the openssl command line.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import importlib.util
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkalog.protocol import ApiKey, encode_request
from kafkalog.protocol.framing import size_prefix
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig
from kafkalog.server.security.errors import SaslFailed
from kafkalog.server.security.listeners import Listener
from kafkalog.server.security.sasl import SaslSettings, Users
from kafkalog.server.security.scram import ScramServer, derive_credential

from .server_process import ServerProcess
from .wire import WireClient

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

USERS = {"alice": "alice-secret", "bob": "b:o=b,pw"}
_LISTENER = re.compile(r"kafkalog listener (\w+)://([\w.\-]+):(\d+)")


# --- the Java client: tests/apache_kafka's kafka_dist fixture, loaded from its conftest -------

_CONFTEST = Path(__file__).resolve().parents[1] / "apache_kafka" / "conftest.py"


def _apache_kafka_conftest():
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(_CONFTEST):
            return module
    spec = importlib.util.spec_from_file_location("kafkalog_tests_apache_kafka_conftest", _CONFTEST)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


kafka_dist = _apache_kafka_conftest().kafka_dist  # the session fixture, usable here


# --- certificates ------------------------------------------------------------------------------


@dataclass
class Certs:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_bundle: Path  # key and certificate in one PEM: the Java client's PEM keystore


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_certs(d: Path) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make test certificates")
    key = ["-newkey", "rsa:2048", "-nodes"]
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "3",
             "-subj", "/CN=kafkalog test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)  # fmt: skip
    for name, cn, ext in (
        ("server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
         "extendedKeyUsage=serverAuth\n"),
        ("client", "kafkalog-client", "extendedKeyUsage=clientAuth\n"),
    ):  # fmt: skip
        (d / f"{name}.ext").write_text(ext)
        _openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/O=kafkalog/CN={cn}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "3",
                 "-extfile", f"{name}.ext", cwd=d)  # fmt: skip
    bundle = d / "client-bundle.pem"
    bundle.write_text((d / "client.key").read_text() + (d / "client.pem").read_text())
    return Certs(d, d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem",
                 d / "client.key", bundle)  # fmt: skip


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return _make_certs(tmp_path_factory.mktemp("certs"))


# --- the brokers -------------------------------------------------------------------------------


class Broker:
    """A running ``kafkalog serve`` and its listeners' advertised host and port by name."""

    def __init__(self, process: ServerProcess) -> None:
        self.process = process
        self.endpoints = {
            m.group(1): (m.group(2), int(m.group(3))) for m in _LISTENER.finditer(process.log())
        }

    def bootstrap(self, listener: str) -> str:
        host, port = self.endpoints[listener]
        return f"{host}:{port}"


@contextlib.contextmanager
def _serving(data_dir: Path, listeners: int, *args: str) -> Iterator[Broker]:
    """``kafkalog serve`` with ``--listen 127.0.0.1:0`` and ``args``, once it has printed its
    ``listeners`` listeners; stopped with SIGTERM after."""
    with ServerProcess(data_dir, *args) as process:
        deadline = time.monotonic() + 10
        while len(_LISTENER.findall(process.log())) < listeners:
            assert time.monotonic() < deadline, process.log()
            time.sleep(0.05)
        yield Broker(process)
        assert process.proc.poll() is None, process.log()  # still serving at the end


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs: Certs):
    """PLAINTEXT (--listen), SSL, SASL_PLAINTEXT and SASL_SSL; users from a file and the
    command line."""
    work = tmp_path_factory.mktemp("secure-broker")
    users = work / "users.txt"
    users.write_text("# test users\nalice:alice-secret\n\n")
    with _serving(
        work / "data",
        4,
        "--listeners",
        "SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--listeners",
        "SASL_SSL://127.0.0.1:0",
        "--ssl-certfile", str(certs.server_cert),
        "--ssl-keyfile", str(certs.server_key),
        "--sasl-users", str(users),
        "--sasl-user", f"bob={USERS['bob']}",
    ) as b:  # fmt: skip
        assert set(b.endpoints) == {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
        yield b
    log = b.process.log()
    assert "alice-secret" not in log and USERS["bob"] not in log  # passwords never logged
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory, certs: Certs):
    """SSL only, client certificates required (ssl.client.auth=required)."""
    work = tmp_path_factory.mktemp("mtls-broker")
    with _serving(
        work / "data",
        2,
        "--listeners", "SSL://127.0.0.1:0",
        "--ssl-certfile", str(certs.server_cert),
        "--ssl-keyfile", str(certs.server_key),
        "--ssl-cafile", str(certs.ca),
        "--ssl-client-auth", "required",
    ) as b:  # fmt: skip
        yield b


# --- client configurations ---------------------------------------------------------------------


def _jaas(mechanism: str, user: str, password: str) -> str:
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )
    return f'{module} required username="{user}" password="{password}";'


def client_configs(
    protocol: str,
    certs: Certs,
    *,
    mechanism: str | None = None,
    user: str = "alice",
    password: str | None = None,
    client_cert: bool = False,
) -> tuple[dict, dict]:
    """librdkafka's and the Java client's settings for one listener."""
    rd: dict[str, str] = {"security.protocol": protocol}
    java: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        rd["ssl.ca.location"] = str(certs.ca)
        java |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}
        if client_cert:
            rd |= {
                "ssl.certificate.location": str(certs.client_cert),
                "ssl.key.location": str(certs.client_key),
            }
            java |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.client_bundle)}
    if mechanism is not None:
        password = USERS[user] if password is None else password
        rd |= {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
        java |= {"sasl.mechanism": mechanism, "sasl.jaas.config": _jaas(mechanism, user, password)}
    return rd, java


# --- librdkafka --------------------------------------------------------------------------------


def rd_produce(bootstrap: str, conf: dict, topic: str, values: list[bytes]) -> None:
    errors: list = []
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf}
    )
    failed: list = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: err and failed.append(err))
    left = p.flush(30)
    assert left == 0 and not failed, (left, failed, errors)


def rd_consume(bootstrap: str, conf: dict, topic: str, n: int) -> list[bytes]:
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            **conf,
        }
    )
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m.value())
        return out
    finally:
        c.close()


def rd_auth_error(bootstrap: str, conf: dict, timeout: float = 20) -> confluent_kafka.KafkaError:
    """The error librdkafka reports for a connection it cannot authenticate (fails if none)."""
    errors: list = []
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf}
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.poll(0.2)
        auth = [e for e in errors if e.code() in (confluent_kafka.KafkaError._AUTHENTICATION,
                                                  confluent_kafka.KafkaError._SSL)]  # fmt: skip
        if auth:
            return auth[0]
    raise AssertionError(f"no authentication error within {timeout} s: {errors}")


# --- the Java client ---------------------------------------------------------------------------


def _config_args(java: dict) -> list[str]:
    return [a for k, v in java.items() for a in ("--config", f"{k}={v}")]


def java_produce(dist, bootstrap: str, java: dict, topic: str, values: list[bytes]) -> None:
    lines = [{"topic": topic, "partition": 0, "value": base64.b64encode(v).decode()}
             for v in values]  # fmt: skip
    acks = dist.produce(bootstrap, lines, configs=java)
    assert len(acks) == len(values)


def java_consume(dist, bootstrap: str, java: dict, topic: str, check: bool = True):
    proc = dist.run(
        "kafkalog.it.RefConsumer",
        "--bootstrap-server", bootstrap, "--topic", topic, "--timeout-ms", "20000",
        *_config_args(java),
        check=check,
        timeout=120,
    )  # fmt: skip
    if not check:
        return proc
    import json

    return [base64.b64decode(json.loads(line)["value"]) for line in proc.stdout.splitlines()]


def _values(tag: str, n: int = 20) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


# --- librdkafka cases --------------------------------------------------------------------------

SASL_CASES = [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


def test_librdkafka_over_tls(broker: Broker, certs: Certs):
    rd, _ = client_configs("SSL", certs)
    topic = "tls-rd"
    rd_produce(broker.bootstrap("SSL"), rd, topic, _values(topic))
    assert rd_consume(broker.bootstrap("SSL"), rd, topic, 20) == _values(topic)


@pytest.mark.parametrize(("protocol", "mechanism"), SASL_CASES)
def test_librdkafka_sasl(broker: Broker, certs: Certs, protocol: str, mechanism: str):
    rd, _ = client_configs(protocol, certs, mechanism=mechanism, user="bob")
    topic = f"rd-{protocol}-{mechanism}".lower()
    rd_produce(broker.bootstrap(protocol), rd, topic, _values(topic))
    assert rd_consume(broker.bootstrap(protocol), rd, topic, 20) == _values(topic)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_wrong_password_fails_fast(broker: Broker, certs: Certs, mechanism: str):
    rd, _ = client_configs("SASL_PLAINTEXT", certs, mechanism=mechanism, password="wrong")
    err = rd_auth_error(broker.bootstrap("SASL_PLAINTEXT"), rd)
    assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION
    expected = (
        "Authentication failed: Invalid username or password"
        if mechanism == "PLAIN"
        else f"invalid credentials with SASL mechanism {mechanism}"
    )
    assert expected in err.str()


def test_embedded_broker_and_what_librdkafka_sends(tmp_path: Path):
    """The security settings embedded (BackgroundServer); librdkafka sends SaslHandshake v1 then
    SaslAuthenticate (KIP-152), not raw tokens, as the broker lists SaslAuthenticate."""
    config = ServerConfig(
        [tmp_path / "data"],
        listeners=[Listener("SASL_PLAINTEXT", "127.0.0.1", 0, "SASL_PLAINTEXT")],
        sasl=SaslSettings(Users.from_passwords({"u": "pw"}, ["SCRAM-SHA-256"])),
        offsets_topic_num_partitions=1,
        transaction_state_log_num_partitions=1,
    )
    with BackgroundServer(config) as server:
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "u", "sasl.password": "pw"}  # fmt: skip
        rd_produce(server.bootstrap, conf, "embedded", [b"v"])
        sent = {name: version for name, version in server.broker.stats.requests}
    assert sent["SaslHandshake"] == 1 and "SaslAuthenticate" in sent


def test_librdkafka_unknown_user_fails(broker: Broker, certs: Certs):
    rd, _ = client_configs("SASL_PLAINTEXT", certs, mechanism="SCRAM-SHA-256", user="alice")
    rd["sasl.username"] = "mallory"
    err = rd_auth_error(broker.bootstrap("SASL_PLAINTEXT"), rd)
    assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION


def test_metadata_advertises_each_listener_its_own_port(broker: Broker, certs: Certs):
    for protocol, mechanism in (("PLAINTEXT", None), ("SSL", None), *SASL_CASES[:1]):
        rd, _ = client_configs(protocol, certs, mechanism=mechanism)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap(protocol),
                                                   **rd})  # fmt: skip
        brokers = admin.list_topics(timeout=20).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [broker.endpoints[protocol]]


def test_plaintext_listener_alongside(broker: Broker, certs: Certs):
    topic = "plain-alongside"
    rd_produce(broker.bootstrap("PLAINTEXT"), {}, topic, _values(topic))
    # and what was written over SASL reads over plaintext: one broker, one log
    assert rd_consume(broker.bootstrap("PLAINTEXT"), {}, topic, 20) == _values(topic)


def test_mutual_tls_librdkafka(mtls_broker: Broker, certs: Certs):
    rd, _ = client_configs("SSL", certs, client_cert=True)
    topic = "mtls-rd"
    rd_produce(mtls_broker.bootstrap("SSL"), rd, topic, _values(topic))
    assert rd_consume(mtls_broker.bootstrap("SSL"), rd, topic, 20) == _values(topic)
    # without a certificate the server ends the handshake (under TLS 1.3 the client learns it
    # only as a closed connection, as with Kafka): no metadata
    anonymous, _ = client_configs("SSL", certs)
    admin = AdminClient({"bootstrap.servers": mtls_broker.bootstrap("SSL"), **anonymous})
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=5)


def test_untrusted_server_certificate_is_refused(broker: Broker, certs: Certs, tmp_path: Path):
    other = _make_certs(tmp_path)  # another CA: the broker's certificate is not from it
    rd, _ = client_configs("SSL", other)
    err = rd_auth_error(broker.bootstrap("SSL"), rd)
    assert err.code() == confluent_kafka.KafkaError._SSL


# --- the wire, before and during authentication ------------------------------------------------


def test_only_api_versions_and_sasl_before_authentication(broker: Broker):
    host, port = broker.endpoints["SASL_PLAINTEXT"]
    c = WireClient(host, port)
    versions = c.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                "client_software_version": "1"})  # fmt: skip
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
    assert keys[ApiKey.SASL_HANDSHAKE] == (0, 1) and keys[ApiKey.SASL_AUTHENTICATE] == (0, 2)
    c.send_raw(encode_request(ApiKey.METADATA, 9, 7, "t", {"topics": None}))
    assert c.read_frame() is None  # closed unanswered, as Kafka's SaslServerAuthenticator
    c.close()
    # SaslAuthenticate before SaslHandshake: closed too
    c = WireClient(host, port)
    c.send_raw(encode_request(ApiKey.SASL_AUTHENTICATE, 2, 1, "t", {"auth_bytes": b"x"}))
    assert c.read_frame() is None
    c.close()


def test_unsupported_mechanism_is_answered_then_closed(broker: Broker):
    c = WireClient(*broker.endpoints["SASL_PLAINTEXT"])
    r = c.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    assert r["error_code"] == 33
    assert r["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert c.read_frame() is None
    c.close()


def test_sasl_authenticate_failure_carries_kafkas_error(broker: Broker):
    c = WireClient(*broker.endpoints["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    r = c.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0nope"})
    assert r["error_code"] == 58
    assert r["error_message"] == "Authentication failed: Invalid username or password"
    assert c.read_frame() is None
    c.close()


def test_sasl_then_requests_on_the_same_connection(broker: Broker):
    c = WireClient(*broker.endpoints["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    r = c.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
    assert r["error_code"] == 0 and r["session_lifetime_ms"] == 0
    meta = c.call(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
    assert [(b["host"], b["port"]) for b in meta["brokers"]] == [broker.endpoints["SASL_PLAINTEXT"]]
    # a second handshake once authenticated: ILLEGAL_SASL_STATE, as Kafka's KafkaApis
    assert c.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 34
    c.close()


def test_v0_handshake_then_raw_tokens(broker: Broker):
    """SaslHandshake v0: the tokens then go without a Kafka header, size-prefixed (pre-KIP-152
    clients); PLAIN is answered with an empty token."""
    c = WireClient(*broker.endpoints["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    token = b"\0bob\0" + USERS["bob"].encode()
    c.send_raw(size_prefix(len(token)) + token)
    assert c.read_frame() == b""
    meta = c.call(ApiKey.METADATA, 1, {"topics": None})
    assert meta["brokers"][0]["port"] == broker.endpoints["SASL_PLAINTEXT"][1]
    c.close()
    # a wrong password in the raw mode: closed
    c = WireClient(*broker.endpoints["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    c.send_raw(size_prefix(len(b"\0bob\0x")) + b"\0bob\0x")
    assert c.read_frame() is None
    c.close()


def test_v0_handshake_scram_raw(broker: Broker):
    c = WireClient(*broker.endpoints["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
    client = _ScramClient("sha256", "alice", "alice-secret")
    first = client.first()
    c.send_raw(size_prefix(len(first)) + first)
    final = client.final(c.read_frame())
    c.send_raw(size_prefix(len(final)) + final)
    client.verify(c.read_frame())
    assert c.call(ApiKey.METADATA, 1, {"topics": None})["brokers"]
    c.close()


class _ScramClient:
    """A minimal SCRAM client (RFC 5802) for the raw-token test."""

    def __init__(self, hash_name: str, user: str, password: str) -> None:
        self.h, self.user, self.password = hash_name, user, password
        self.nonce = "fyko+d2lbbFgONRv9qkxdawL"

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        self.server_first = server_first.decode()
        attrs = dict(a.split("=", 1) for a in self.server_first.split(","))
        assert attrs["r"].startswith(self.nonce) and int(attrs["i"]) == 4096
        salt = base64.b64decode(attrs["s"])
        salted = hashlib.pbkdf2_hmac(self.h, self.password.encode(), salt, int(attrs["i"]))
        self.salted = salted
        without_proof = f"c=biws,r={attrs['r']}"
        self.auth = f"{self.bare},{self.server_first},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.h).digest()
        stored = hashlib.new(self.h, client_key).digest()
        signature = hmac.new(stored, self.auth, self.h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        server_key = hmac.new(self.salted, b"Server Key", self.h).digest()
        expected = hmac.new(server_key, self.auth, self.h).digest()
        assert server_final == b"v=" + base64.b64encode(expected)


def test_scram_sha_256_rfc7677_example(monkeypatch):
    """RFC 7677's example exchange, byte for byte (the server nonce fixed to the RFC's)."""
    from kafkalog.server.security import scram

    credential = derive_credential(
        "SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    )
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get)
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"
    # a wrong proof fails
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get)
    server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(SaslFailed):
        server.step(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
            b"p=AAAAAapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        )


def test_cli_refuses_inconsistent_security_settings(tmp_path: Path):
    def serve(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "kafkalog.cli.main", "serve", str(tmp_path / "d"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    r = serve("--listeners", "SSL://127.0.0.1:0")
    assert r.returncode == 2 and "--ssl-certfile" in r.stderr
    r = serve("--listeners", "SASL_PLAINTEXT://127.0.0.1:0")
    assert r.returncode == 2 and "--sasl-user" in r.stderr
    r = serve("--listeners", "FOO://127.0.0.1:0")
    assert r.returncode == 2 and "FOO" in r.stderr
    r = serve("--listeners", "SSL://127.0.0.1:0", "--ssl-certfile", str(tmp_path / "none.pem"))
    assert r.returncode == 1 and "none.pem" in r.stderr


# --- Kafka's Java client -----------------------------------------------------------------------


def test_java_over_tls(kafka_dist, broker: Broker, certs: Certs):
    _, java = client_configs("SSL", certs)
    topic = "tls-java"
    java_produce(kafka_dist, broker.bootstrap("SSL"), java, topic, _values(topic))
    assert java_consume(kafka_dist, broker.bootstrap("SSL"), java, topic) == _values(topic)


def test_java_mutual_tls(kafka_dist, mtls_broker: Broker, certs: Certs):
    _, java = client_configs("SSL", certs, client_cert=True)
    topic = "mtls-java"
    java_produce(kafka_dist, mtls_broker.bootstrap("SSL"), java, topic, _values(topic))
    assert java_consume(kafka_dist, mtls_broker.bootstrap("SSL"), java, topic) == _values(topic)


@pytest.mark.parametrize(("protocol", "mechanism"), SASL_CASES)
def test_java_sasl(kafka_dist, broker: Broker, certs: Certs, protocol: str, mechanism: str):
    _, java = client_configs(protocol, certs, mechanism=mechanism)
    topic = f"java-{protocol}-{mechanism}".lower()
    java_produce(kafka_dist, broker.bootstrap(protocol), java, topic, _values(topic))
    assert java_consume(kafka_dist, broker.bootstrap(protocol), java, topic) == _values(topic)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_java_wrong_password(kafka_dist, broker: Broker, certs: Certs, mechanism: str):
    _, java = client_configs("SASL_PLAINTEXT", certs, mechanism=mechanism, password="wrong")
    started = time.monotonic()
    proc = java_consume(kafka_dist, broker.bootstrap("SASL_PLAINTEXT"), java, "x", check=False)
    assert proc.returncode != 0
    assert "SaslAuthenticationException" in proc.stderr, proc.stderr[-2000:]
    expected = (
        "Authentication failed: Invalid username or password"
        if mechanism == "PLAIN"
        else f"invalid credentials with SASL mechanism {mechanism}"
    )
    assert expected in proc.stderr
    assert time.monotonic() - started < 60  # an error, not the consumer's 20 s timeouts
