"""Test certificates: a CA, a server certificate for 127.0.0.1 and a client certificate, made
with the openssl CLI (the test is skipped where it is not installed)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certificates(folder: Path) -> dict[str, Path]:
    """PEM files ``ca``, ``ca-key``, ``srv``, ``srv-key``, ``cli``, ``cli-key`` in ``folder``."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed (needed to make test certificates)")
    f = {n: folder / f"{n}.pem" for n in ("ca", "ca-key", "srv", "srv-key", "cli", "cli-key")}
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
             "-keyout", str(f["ca-key"]), "-out", str(f["ca"]))  # fmt: skip
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for name, cn in (("srv", "127.0.0.1"), ("cli", "vllm-scaler")):
        csr = folder / f"{name}.csr"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}",
                 "-keyout", str(f[f"{name}-key"]), "-out", str(csr))  # fmt: skip
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(f["ca"]),
                 "-CAkey", str(f["ca-key"]), "-CAcreateserial", "-days", "1",
                 "-extfile", str(ext), "-out", str(f[name]))  # fmt: skip
    return f


def mutual_tls_server_context(f: dict[str, Path]) -> ssl.SSLContext:
    """A server context that presents ``srv`` and requires a client certificate of ``ca``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(f["ca"]))
    ctx.load_cert_chain(f["srv"], f["srv-key"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
