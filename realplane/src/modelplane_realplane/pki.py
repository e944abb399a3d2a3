"""Certificates and keys for one local control plane, made with the openssl command.

One CA signs everything: the API servers' serving certificates, Crossplane's client
certificate for dialling functions (mTLS), the functions' serving certificate and the
providers' webhook certificates. Every serving certificate names 127.0.0.1 and localhost,
the only addresses the plane listens on.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path


def _openssl(directory: Path, *args: str) -> None:
    done = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {done.stderr}")


def make_ca(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=modelplane-realplane-ca", "-keyout", "ca.key", "-out", "ca.crt",
    )  # fmt: skip


def issue(directory: Path, name: str, common_name: str, *, server: bool, client: bool) -> None:
    """``name``.crt and ``name``.key in ``directory``, signed by the CA there."""
    usages = ",".join(u for u, wanted in (("serverAuth", server), ("clientAuth", client)) if wanted)
    extensions = [f"extendedKeyUsage={usages}", "keyUsage=digitalSignature,keyEncipherment"]
    if server:
        extensions.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
    (directory / f"{name}.ext").write_text("\n".join(extensions) + "\n")
    _openssl(
        directory, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={common_name}",
        "-keyout", f"{name}.key", "-out", f"{name}.csr",
    )  # fmt: skip
    _openssl(
        directory, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "30", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
    )  # fmt: skip


def service_account_keys(directory: Path) -> None:
    _openssl(directory, "genrsa", "-out", "sa.key", "2048")
    _openssl(directory, "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")


def admin_token(directory: Path) -> str:
    """A bearer token for a system:masters user, written as the API server's token file."""
    token = secrets.token_hex(24)
    (directory / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')
    return token
