"""A test CA (made with `cryptography`), certificates it signs, and the lab's official-SDK MCP
server served over TLS on 127.0.0.1, for the proxy's TLS tests."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.proxy import ROOT, free_port, stop, wait_port


@dataclass(frozen=True)
class CertAuthority:
    """A CA certificate on disk and its key in memory."""

    cert_path: Path
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def issue(self, folder: Path, name: str) -> tuple[Path, Path]:
        """A server certificate for 127.0.0.1 and localhost: (cert PEM, key PEM), and
        `<name>.pem` beside them holding both, as `--cert` takes it."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        cert_path, key_path = folder / f"{name}-cert.pem", folder / f"{name}-key.pem"
        cert_path.write_bytes(cert_pem)
        key_path.write_bytes(key_pem)
        (folder / f"{name}.pem").write_bytes(key_pem + cert_pem)
        return cert_path, key_path


def make_ca(folder: Path, name: str = "seamwatch test CA") -> CertAuthority:
    """A self-signed CA, its certificate written to `folder/<name>.pem`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = folder / f"{name.replace(' ', '-')}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return CertAuthority(path, cert, key)


# The lab's SDK server app, served by uvicorn with TLS (the lab runs it over plain HTTP).
_TLS_SERVER = """\
import sys
import uvicorn
from lab.servers.sdk_server import LabState, build_server
port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
app = build_server(LabState(None, charge_gate=False)).streamable_http_app(
    session_idle_timeout=None
)
uvicorn.run(
    app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
    ssl_certfile=cert, ssl_keyfile=key,
)
"""


@contextmanager
def tls_sdk_server(cert: Path, key: Path) -> Iterator[str]:
    """The lab's official-SDK MCP server on https://127.0.0.1:PORT (its origin, yielded);
    stopped by its pid at exit."""
    port = free_port()
    with _serving(["-c", _TLS_SERVER, str(port), str(cert), str(key)], port):
        yield f"https://127.0.0.1:{port}"


@contextmanager
def sdk_server(*options: str) -> Iterator[str]:
    """The lab's official-SDK MCP server (`lab.servers.sdk_server` with `options`) on
    http://127.0.0.1:PORT (its origin, yielded); stopped by its pid at exit."""
    port = free_port()
    with _serving(["-m", "lab.servers.sdk_server", "--port", str(port), *options], port):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def _serving(argv: list[str], port: int) -> Iterator[None]:
    """A Python process run with `argv` until it listens on `port`; stopped by its pid."""
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_port(port, proc, timeout=30)
        yield
    finally:
        stop(proc)


# An official-SDK client: lists the tools and calls a read-only one; prints its result.
_CLIENT = """\
import sys
import anyio
from mcp import Client

async def main() -> None:
    async with Client(sys.argv[1]) as client:
        tools = await client.list_tools()
        result = await client.call_tool("get_balance", {"account": "acct-1"})
        print(len(tools.tools), result.content[0].text)

anyio.run(main)
"""


def sdk_client(
    url: str,
    env: dict[str, str],
    timeout: float = 60,
    *,
    script: str = _CLIENT,
    more: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the official SDK client against `url` with `env` added (trust, proxy); `script`, a
    client of its own taking `url` and the `more` URLs as arguments."""
    base = {k: v for k, v in os.environ.items() if k.upper() not in _PROXY_ENV}
    return subprocess.run(
        [sys.executable, "-c", script, url, *more],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_PROXY_ENV = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_DIR"})
