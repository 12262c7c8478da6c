# SPDX-License-Identifier: Apache-2.0
"""fake-gcs-server (a Google Cloud Storage emulator written in Go) on a free
127.0.0.1 port, for the gs:// store's tests.

ensure_fake_gcs() builds it once from the Go module proxy (`go install
github.com/fsouza/fake-gcs-server@vVERSION`) into
cache_dir()/fake-gcs-server-VERSION/, staged in a temporary directory and
renamed into place when complete. It honours ifGenerationMatch on uploads
(the compare-and-set the store needs) and accepts any or no token.

FakeGCS runs it with the filesystem backend in its work directory, so
restart() keeps the bucket and objects (and their generations); the test
bucket is created once it answers. env() exports STORAGE_EMULATOR_HOST (the
variable Google's client libraries and s3lect honour: an emulator, no token
needed), S3LECT_TEST_GCS_ENDPOINT, S3LECT_TEST_BUCKET and
S3LECT_TEST_LOCK_PREFIX=gs://BUCKET/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.servers import Server, ServerStartError, cache_dir  # noqa: E402
else:
    from .servers import Server, ServerStartError, cache_dir

FAKE_GCS_VERSION = "1.56.1"
BUILD_TIMEOUT_S = 1200.0


def fake_gcs_dir() -> Path:
    return cache_dir() / f"fake-gcs-server-{FAKE_GCS_VERSION}"


def ensure_fake_gcs() -> str:
    """Path of the fake-gcs-server binary, built with `go install` on first
    use. Raises ServerStartError saying why when it cannot be built."""
    dest = fake_gcs_dir()
    binary = dest / "fake-gcs-server"
    if os.access(binary, os.X_OK):
        return str(binary)
    go = shutil.which("go")
    if not go:
        raise ServerStartError("fake-gcs-server is not installed and there is no Go toolchain "
                               "to build it (scripts/deps installs both)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        env = dict(os.environ, GOBIN=str(stage), CGO_ENABLED="0")
        cmd = [go, "install", f"github.com/fsouza/fake-gcs-server@v{FAKE_GCS_VERSION}"]
        try:
            r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ServerStartError(f"building fake-gcs-server took over {BUILD_TIMEOUT_S:.0f}s") \
                from None
        if r.returncode != 0 or not (stage / "fake-gcs-server").is_file():
            raise ServerStartError(f"building fake-gcs-server {FAKE_GCS_VERSION} failed "
                                   f"(exit {r.returncode}):\n$ {' '.join(cmd)}\n{r.stdout[-4000:]}")
        if dest.exists():  # another process finished first
            return str(binary) if os.access(binary, os.X_OK) else _replace(stage, dest)
        stage.rename(dest)
        return str(binary)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _replace(stage: Path, dest: Path) -> str:
    shutil.rmtree(dest, ignore_errors=True)
    stage.rename(dest)
    return str(dest / "fake-gcs-server")


def _request(method: str, url: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class FakeGCS(Server):
    name = "fake-gcs"

    def __init__(self, bucket: str = "s3lect-test", binary: str | None = None):
        super().__init__(bucket)
        self.binary = binary or ensure_fake_gcs()

    def command(self) -> list[str]:
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        return [self.binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                "-public-host", f"127.0.0.1:{self.port}", "-backend", "filesystem",
                "-filesystem-root", str(data), "-log-level", "warn"]

    def ready(self) -> bool:
        try:
            status, _ = _request("GET", f"{self.endpoint}/storage/v1/b")
        except OSError:
            return False
        return status == 200

    def on_ready(self) -> None:
        status, body = _request("GET", f"{self.endpoint}/storage/v1/b/{self.bucket}")
        if status == 200:
            return
        status, body = _request("POST", f"{self.endpoint}/storage/v1/b",
                                json.dumps({"name": self.bucket}).encode(),
                                {"Content-Type": "application/json"})
        if status not in (200, 409):
            raise RuntimeError(f"creating bucket {self.bucket}: HTTP {status} {body[:300]!r}")

    def env(self) -> dict[str, str]:
        return {
            "STORAGE_EMULATOR_HOST": f"127.0.0.1:{self.port}",
            "S3LECT_TEST_GCS_ENDPOINT": self.endpoint,
            "S3LECT_TEST_BUCKET": self.bucket,
            "S3LECT_TEST_LOCK_PREFIX": f"gs://{self.bucket}/",
        }

    # Direct access for tests (what the store wrote, tampering).
    def get_object(self, name: str) -> tuple[int, bytes, str]:
        q = urllib.parse.quote(name, safe="")
        req = urllib.request.Request(f"{self.endpoint}/storage/v1/b/{self.bucket}/o/{q}?alt=media")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read(), r.headers.get("x-goog-generation", "")
        except urllib.error.HTTPError as e:
            return e.code, e.read(), ""

    def put_object(self, name: str, body: bytes) -> int:
        q = urllib.parse.quote(name, safe="")
        status, _ = _request("POST", f"{self.endpoint}/upload/storage/v1/b/{self.bucket}/o"
                             f"?uploadType=media&name={q}", body,
                             {"Content-Type": "application/json"})
        return status


if __name__ == "__main__":
    print(ensure_fake_gcs())
    sys.exit(0)
