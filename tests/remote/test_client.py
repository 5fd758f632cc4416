"""The remote saver's own side: what a worker process loads, and what it does when the
service does not answer (bounded retries, then StoreUnavailable naming the URL)."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.errors import (
    CheckpointCodecError,
    CheckpointConfigError,
    StoreUnavailable,
)
from checkpoints.remote import RemoteSaver, service_url
from checkpoints.remote.wire import CONTENT_TYPE, pack
from tests.standalone import ROOT, run_python
from tests.store_helpers import config_for, put_chain, remote_saver

WORKER = """
import json, sys

class NotInstalled:
    # A worker installs langgraph and httpx only: these packages are absent there.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in (
            "django", "dj_database_url", "psycopg", "psycopg2", "psycopg_pool", "redis"
        ):
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on a worker)")

sys.meta_path.insert(0, NotInstalled())
from checkpoints import from_conn_string
with from_conn_string({url!r}, api_key={key!r}) as saver:
    config = {{"configurable": {{"thread_id": "from-a-worker", "checkpoint_ns": ""}}}}
    from langgraph.checkpoint.base import empty_checkpoint
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {{"a": "written by a worker"}}
    checkpoint["channel_versions"] = {{"a": saver.get_next_version(None)}}
    saver.put(config, checkpoint, {{"source": "input", "step": -1}}, checkpoint["channel_versions"])
    found = saver.get_tuple(config).checkpoint["channel_values"]
    loaded = sorted(
        m for m in sys.modules if m.split(".")[0] in ("django", "psycopg", "psycopg2", "redis")
    )
    print(json.dumps({{"values": found, "loaded": loaded, "provider": saver.provider}}))
"""


@pytest.mark.django_db(transaction=True)
def test_a_worker_process_writes_through_the_service_without_django_or_a_driver(request):
    saver = remote_saver(request)
    url = "checkpoints+" + saver.url.removesuffix("store/v1/")
    key = saver._headers["x-api-key"]
    done = run_python(["-c", WORKER.format(url=url, key=key)], cwd=ROOT)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"values": {"a": "written by a worker"}, "loaded": [], "provider": "sqlite"}
    assert saver.get_tuple(config_for("from-a-worker")).checkpoint["channel_values"] == {
        "a": "written by a worker"
    }


def test_service_urls():
    assert service_url("checkpoints+https://store.example.com") == (
        "https://store.example.com/store/v1/"
    )
    assert service_url("checkpoints+http://127.0.0.1:8000/ckpt/") == (
        "http://127.0.0.1:8000/ckpt/store/v1/"
    )
    for bad in ("postgres://x/y", "checkpoints+https://", "checkpoints+https://u:p@host"):
        with pytest.raises(CheckpointConfigError):
            service_url(bad)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_service_is_retried_for_the_budget_then_named():
    url = f"checkpoints+http://127.0.0.1:{_closed_port()}"
    counted = _Flaky(0, httpx.HTTPTransport())
    # A budget long enough for more than one try on a loaded machine.
    saver = RemoteSaver(url, api_key="k", retry_seconds=2.0, transport=counted)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        saver.get_tuple(config_for("t"))
    assert time.monotonic() - started >= 0.3
    assert saver.url in str(caught.value) and "attempts" in str(caught.value)
    assert counted.seen > 1
    # A copy is not safe to repeat: one try, then the same error.
    counted.seen = 0
    with pytest.raises(StoreUnavailable, match="once"):
        saver.copy_thread("a", "b")
    assert counted.seen == 1


class _Flaky:
    """An httpx transport answering 503 ``failures`` times, then passing calls through."""

    def __init__(self, failures: int, inner: httpx.BaseTransport) -> None:
        self.failures = failures
        self.inner = inner
        self.seen = 0
        self.lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.seen += 1
            failing = self.seen <= self.failures
        if failing:
            return httpx.Response(503, content=b"restarting")
        return self.inner.handle_request(request)


@pytest.mark.django_db(transaction=True)
def test_a_503_while_the_service_restarts_is_retried_and_the_put_lands(request):
    base = remote_saver(request)
    flaky = _Flaky(3, httpx.HTTPTransport())
    saver = RemoteSaver(
        base.url.removesuffix("store/v1/"),
        api_key=base._headers["x-api-key"],
        retry_seconds=10,
        transport=flaky,
    )
    config = put_chain(saver, "through-a-restart", {"a": 1})
    # Three 503s and the service's answer to info (its codec policy, asked once before the
    # first put is sized), then the put itself.
    assert flaky.seen == 5
    assert base.get_tuple(config).checkpoint["channel_values"] == {"a": 1}
    # Past the budget, the answer is named as the service's unavailability.
    saver = RemoteSaver(
        base.url.removesuffix("store/v1/"),
        api_key=base._headers["x-api-key"],
        retry_seconds=0.2,
        transport=_Flaky(1000, httpx.HTTPTransport()),
    )
    with pytest.raises(StoreUnavailable, match="503"):
        saver.get_tuple(config)


def test_a_value_the_serializer_refuses_is_named_before_anything_is_sent():
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            200, content=pack({"r": None}), headers={"content-type": CONTENT_TYPE}
        )

    saver = RemoteSaver("http://store", transport=httpx.MockTransport(handler))
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": "lone \ud800 surrogate", "b": threading.Lock()}
    for channel in ("a", "b"):
        versions = {channel: saver.get_next_version(None)}
        with pytest.raises(CheckpointCodecError, match=f"channel '{channel}'"):
            saver.put(config_for("t", ns=""), checkpoint, {}, versions)
    with pytest.raises(CheckpointCodecError, match="write to channel 'w'"):
        saver.put_writes(config_for("t", "1", ns=""), [("w", threading.Lock())], "task")
    assert sent == []


def _self_signed(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no CA signed, and its key (PEM files)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_an_https_service_is_verified_and_plain_http_is_not_treated_as_tls(tmp_path):
    """Over https the server's certificate is checked (one no CA signed is refused before
    any request goes out); only a plain http URL skips building the TLS context (which
    loads the CA bundle: tens of ms of a worker's first call)."""
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    requests: list[str] = []

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            requests.append(self.path)
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_self_signed(tmp_path))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        saver = RemoteSaver(f"checkpoints+https://127.0.0.1:{port}", api_key="k", retry_seconds=0.2)
        with pytest.raises(StoreUnavailable) as caught:
            saver.get_tuple(config_for("t"))
        chain = []
        error: BaseException | None = caught.value
        while error is not None:
            chain.append(str(error))
            error = error.__cause__ or error.__context__
        assert any("CERTIFICATE_VERIFY_FAILED" in text for text in chain), chain
        assert requests == []
    finally:
        server.shutdown()
        server.server_close()
    plain = RemoteSaver(f"checkpoints+http://127.0.0.1:{_closed_port()}", api_key="k")
    assert plain._transport_options()["verify"] is False
    assert "verify" not in saver._transport_options()
