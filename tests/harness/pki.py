# SPDX-License-Identifier: Apache-2.0
"""Throwaway certificates for the tests (issue 40 item 5): CAs and the
certificates they issue, P-256 keys (or RSA 2048 where a peer needs RSA)
made by the openssl command, valid two days, in a directory of the test's.
One helper instead of a copy per suite and per server of the harness.

    ca_pem, ca_key = make_ca(d, "ca")
    pem, key = issue(d, "node", "ca", san="IP:127.0.0.1,DNS:localhost")
    pin = spki_pin(pem)
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
RSA = ["-newkey", "rsa:2048", "-nodes"]
KEYS = {"ec": EC, "rsa": RSA}


def openssl(*args: str, cwd: Path) -> None:
    """Runs openssl in cwd; RuntimeError with its stderr when it fails."""
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed ({r.returncode}): {r.stderr}")


def make_ca(d: Path, name: str, subject: str | None = None, constraints: bool = True,
            key_usage: str = "keyCertSign", key: str = "ec") -> tuple[Path, Path]:
    """A self-signed CA d/NAME.pem with its key d/NAME.key (key "ec" or
    "rsa"). constraints: explicit critical basicConstraints CA:TRUE and
    keyUsage (key_usage); without, openssl's defaults for a self-signed
    certificate (also what a self-signed leaf certificate gets here)."""
    ext = ["-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", f"keyUsage=critical,{key_usage}"] if constraints else []
    openssl("req", "-x509", *KEYS[key], "-keyout", f"{name}.key", "-out", f"{name}.pem",
            "-days", "2", "-subj", subject or f"/CN=s3lect test {name}", *ext, cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


def issue(d: Path, name: str, ca: str, san: str, subject: str | None = None,
          eku: str | None = "serverAuth,clientAuth", key: str = "ec") -> tuple[Path, Path]:
    """A certificate d/NAME.pem (key d/NAME.key, "ec" or "rsa") issued by the
    CA d/CA.pem (make_ca) with subjectAltName san and extendedKeyUsage eku
    (None: no extendedKeyUsage)."""
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n"
                                   + (f"extendedKeyUsage={eku}\n" if eku else ""))
    openssl("req", "-new", *KEYS[key], "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", subject or f"/CN={name}", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


def spki_pin(cert: Path) -> str:
    """The pin of cert's key as s3lect's peer mode writes it (peerKeySha256):
    base64 of the SHA-256 of the DER SubjectPublicKeyInfo."""
    run = dict(capture_output=True, check=True, timeout=60)
    pub = subprocess.run(["openssl", "x509", "-in", str(cert), "-pubkey", "-noout"], **run).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, **run).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()
