"""TLS as the SDK did it: the system's trust or SSL_CERT_FILE, one context per process."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tilth.errors import ModelError
from tilth.model import FakeServer, OpenAIModel, Script, reply
from tilth.model.http_chat import tls_context

ModelFactory = Callable[..., OpenAIModel]
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def certificate(tmp_path: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 (its key beside it, ``.key``)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        if os.environ.get("CI") == "true":
            pytest.fail("openssl is needed to make a test certificate (apt-get install openssl)")
        pytest.skip("openssl is not installed")
    cert = tmp_path / "server.pem"
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(cert.with_suffix(".key")), "-out", str(cert)]
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", *subject, *files],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert


@pytest.fixture
def https_server(certificate: Path) -> Iterator[FakeServer]:
    """The fake server behind TLS with that certificate."""
    server = FakeServer(Script([reply("over tls")] * 3)).start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, certificate.with_suffix(".key"))
    httpd = server._httpd
    assert httpd is not None
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    try:
        yield server
    finally:
        server.stop()


def test_an_unknown_certificate_is_refused_and_ssl_cert_file_trusts_it(
    fast_model: ModelFactory,
    https_server: FakeServer,
    certificate: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base_url = https_server.base_url.replace("http://", "https://")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(ModelError, match="certificate verify failed"):
        fast_model(None, base_url=base_url, max_retries=0).complete(USER, [])
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
    first = fast_model(None, base_url=base_url)
    assert first.complete(USER, []).content == "over tls"
    assert fast_model(None, base_url=base_url).complete(USER, []).content == "over tls"
    assert tls_context(str(certificate), None) is tls_context(str(certificate), None), "shared"
    assert tls_context(str(certificate), None) is not tls_context(None, None)


def test_an_unreadable_ssl_cert_file_is_named(
    fast_model: ModelFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nowhere.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    with FakeServer(Script([reply("unused")])) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server).complete(USER, [])
    assert f"cannot read the trusted certificates (SSL_CERT_FILE={missing})" in str(caught.value)
    assert caught.value.hint == "check SSL_CERT_FILE and SSL_CERT_DIR"
