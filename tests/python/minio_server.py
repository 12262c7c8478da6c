"""Starts a throwaway MinIO on a free 127.0.0.1 port (fallback for when the
shared tests/conftest.py fixture is not there). Fails loudly, with MinIO's
log, if the server cannot start: a suite must not skip because of that."""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator

from s3client import S3Client

BUCKET = "s3lect-test"


@dataclass
class MinioServer:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    def env(self) -> Dict[str, str]:
        return {
            "S3LECT_TEST_ENDPOINT": self.endpoint,
            "S3LECT_TEST_BUCKET": self.bucket,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _live(port: int) -> bool:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/minio/health/live")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


@contextlib.contextmanager
def start_minio() -> Iterator[MinioServer]:
    endpoint = os.environ.get("S3LECT_TEST_ENDPOINT")
    if endpoint:
        server = MinioServer(
            endpoint=endpoint,
            bucket=os.environ.get("S3LECT_TEST_BUCKET", BUCKET),
            access_key=os.environ["AWS_ACCESS_KEY_ID"],
            secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        )
        S3Client(server.endpoint, server.access_key, server.secret_key).create_bucket(server.bucket)
        yield server
        return

    cache = Path(os.environ.get("S3LECT_CACHE", Path.home() / ".cache" / "s3lect"))
    binary = cache / "bin" / "minio"
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"MinIO not found at {binary}; run scripts/minio-install first")
    workdir = Path(tempfile.mkdtemp(prefix="s3lect-py-minio-"))
    access_key = "test" + secrets.token_hex(6)
    secret_key = secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        MINIO_ROOT_USER=access_key,
        MINIO_ROOT_PASSWORD=secret_key,
        MINIO_UPDATE="off",
        MINIO_BROWSER="off",
    )
    log_path = workdir / "minio.log"
    proc = None
    try:
        for _attempt in range(3):  # a free port can be taken between probe and bind
            port, console = _free_port(), _free_port()
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [str(binary), "server", "--quiet", "--address", f"127.0.0.1:{port}",
                     "--console-address", f"127.0.0.1:{console}", str(workdir / "data")],
                    stdout=log, stderr=subprocess.STDOUT, env=env,
                )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None and not _live(port):
                time.sleep(0.1)
            if proc.poll() is None and _live(port):
                break
            proc.kill()
            proc.wait()
            proc = None
        if proc is None:
            raise RuntimeError("MinIO did not start; its log:\n" + log_path.read_text(errors="replace"))
        server = MinioServer(f"http://127.0.0.1:{port}", BUCKET, access_key, secret_key)
        S3Client(server.endpoint, access_key, secret_key).create_bucket(BUCKET)
        yield server
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
