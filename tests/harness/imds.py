# SPDX-License-Identifier: Apache-2.0
"""EC2 instance metadata for the tests, on free 127.0.0.1 ports.

ImdsMock runs AWS's EC2 metadata mock (github.com/aws/amazon-ec2-metadata-mock,
built and cached by scripts/imds-mock-install) in IMDSv2-only mode (or not)
with the role, credentials and region the test chooses (its -c config file
overrides the default values), waits until it hands out session tokens, and
always stops it.

FakeImds is a small IMDS of the tests' own for what the mock cannot do:
answers chosen by the first path segment of the endpoint
(AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:PORT/<case>):

    ok            IMDSv2: PUT /latest/api/token (TTL header required),
                  GETs need the token (else 401)
    v1only-403|404|405   the token PUT answers that status; GETs need no token
    token500      the token PUT answers 500
    slowtoken     the token PUT waits 3 s
    norole        the role list answers 404
    badtoken      GETs answer 401 even with the token
    garbage       the credentials answer is not JSON
    codefail      the credentials answer has Code "Failure"
    badexpiry     the credentials answer's Expiration is not a time
    slowcreds     the credentials answer waits 3 s
    creds404      the credentials answer 404
    huge          the credentials answer is 200 KiB

GET /_count (no case) answers {"puts": n, "gets": n} so far.

Command line (ctest runs the C test this way):

    python3 tests/harness/imds.py with-metadata-servers -- CMD [ARGS...]

starts a ContainerCredsServer, a FakeImds and, when the mock is installed, an
ImdsMock (IMDSv2 only), exports where they are and what they serve
(S3LECT_TEST_CONTAINER_BASE, S3LECT_TEST_CONTAINER_{AKID,SECRET,TOKEN,EXPIRATION,ROLE_ARN},
S3LECT_TEST_FAKE_IMDS, S3LECT_TEST_FAKE_IMDS_{AKID,SECRET,SESSION,ROLE,REGION}, S3LECT_TEST_IMDS_MOCK,
S3LECT_TEST_IMDS_MOCK_{AKID,SECRET,TOKEN,EXPIRATION,ROLE,REGION}, or
S3LECT_TEST_IMDS_MOCK_MISSING=<why>), runs CMD, stops everything, and exits
with CMD's status.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.container_creds import ContainerCredsServer, throwaway_creds  # noqa: E402
    from harness.httpthread import QuietHandler, ThreadedHttpServer  # noqa: E402
    from harness.servers import cache_dir, free_port, stop_process_group  # noqa: E402
else:
    from .container_creds import ContainerCredsServer, throwaway_creds
    from .httpthread import QuietHandler, ThreadedHttpServer
    from .servers import cache_dir, free_port, stop_process_group

REPO = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT_S = 30.0
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"


class ImdsMockMissing(RuntimeError):
    """The mock is not installed and could not be built (the message says why)."""


def find_imds_mock(install: bool = True) -> str:
    """Path of the mock binary: the cached one, else built by
    scripts/imds-mock-install (when install is true). Raises ImdsMockMissing."""
    cached = cache_dir() / "bin" / "ec2-metadata-mock"
    if os.access(cached, os.X_OK):
        return str(cached)
    if not install:
        raise ImdsMockMissing(f"{cached} is not installed (run scripts/imds-mock-install)")
    out = subprocess.run([str(REPO / "scripts" / "imds-mock-install")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=900)
    path = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not path or not os.access(path, os.X_OK):
        raise ImdsMockMissing("scripts/imds-mock-install failed (it needs Go and the Go module "
                              f"proxy): {out.stderr.strip()[-500:]}")
    return path


def imds_creds(hours: float = 6.0) -> dict:
    """Throwaway credentials in IMDS's answer format."""
    c = throwaway_creds(hours)
    return {
        "Code": "Success",
        "LastUpdated": c["Expiration"],
        "Type": "AWS-HMAC",
        "AccessKeyId": c["AccessKeyId"],
        "SecretAccessKey": c["SecretAccessKey"],
        "Token": c["Token"],
        "Expiration": c["Expiration"],
    }


class ImdsMock:
    """AWS's EC2 metadata mock on 127.0.0.1 serving chosen credentials."""

    def __init__(self, creds: dict | None = None, role: str = "s3lect-test-role",
                 region: str = "eu-west-3", v2_only: bool = True, binary: str | None = None):
        self.binary = binary or find_imds_mock()
        self.creds = creds or imds_creds()
        self.role = role
        self.region = region
        self.v2_only = v2_only
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="s3lect-imds-"))
        self.log_path = self.workdir / "imds-mock.log"  # holds tokens: never copied elsewhere
        self._log = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _config(self) -> Path:
        cfg = {
            "metadata": {
                "paths": {
                    "iam-security-credentials":
                        f"/latest/meta-data/iam/security-credentials/{self.role}",
                },
                "values": {
                    "iam-security-credentials-role": self.role,
                    "iam-security-credentials": self.creds,
                    "placement-region": self.region,
                },
            }
        }
        p = self.workdir / "aemm-config.json"
        p.write_text(json.dumps(cfg))
        return p

    def command(self) -> list[str]:
        cmd = [self.binary, "-n", "127.0.0.1", "-p", str(self.port), "-c", str(self._config())]
        if self.v2_only:
            cmd.append("-I")
        return cmd

    def _ready(self) -> bool:
        req = urllib.request.Request(self.endpoint + "/latest/api/token", method="PUT",
                                     headers={TTL_HEADER: "60"})
        try:
            with urllib.request.urlopen(req, timeout=2) as r:
                return r.status == 200
        except (OSError, ValueError):
            return False

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return "(no log)"

    def start(self) -> "ImdsMock":
        errors = []
        for _attempt in range(3):  # the port can be taken between probe and bind
            self.port = free_port()
            self._log = open(self.log_path, "ab")
            env = dict(os.environ, HOME=str(self.workdir))  # it reads and writes under $HOME
            self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, cwd=self.workdir,
                                         start_new_session=True)
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self._ready():
                    return self
                time.sleep(0.05)
            errors.append(f"exited with status {self.proc.returncode}" if self.proc.poll() is not None
                          else f"no token within {START_TIMEOUT_S:.0f}s")
            self.stop(keep=True)
        raise RuntimeError(f"ec2-metadata-mock could not be started on 127.0.0.1 "
                           f"({'; '.join(errors)})\n--- log ---\n{self.log_text()}")

    def stop(self, keep: bool = False) -> None:
        p, self.proc = self.proc, None
        stop_process_group(p)
        if self._log:
            self._log.close()
            self._log = None
        if not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "ImdsMock":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _FakeHandler(QuietHandler):
    def _send(self, status: int, body: bytes | str, extra: dict | None = None) -> None:
        self.send_body(status, body, "text/plain", extra)

    def _split(self) -> tuple[str, str]:
        path = self.path.split("?", 1)[0]
        parts = path.split("/", 2)  # "", case, rest
        if len(parts) < 3:
            return "", path
        return parts[1], "/" + parts[2]

    def do_PUT(self):  # noqa: N802
        owner = self.server.owner
        case, rest = self._split()
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(min(n, 65536))
        with owner.lock:
            owner.puts += 1
        if rest != "/latest/api/token":
            return self._send(404, "not found")
        if case.startswith("v1only-"):
            return self._send(int(case.split("-", 1)[1]), "no tokens here")
        if case == "token500":
            return self._send(500, "internal error")
        if case == "slowtoken":
            time.sleep(3)
        ttl = self.headers.get(TTL_HEADER)
        if not ttl or not ttl.isdigit() or not 0 < int(ttl) <= 21600:
            return self._send(400, "bad ttl")
        return self._send(200, owner.token, {TTL_HEADER: ttl})

    def do_GET(self):  # noqa: N802
        owner = self.server.owner
        if self.path == "/_count":
            with owner.lock:
                body = json.dumps({"puts": owner.puts, "gets": owner.gets})
            return self._send(200, body)
        case, rest = self._split()
        with owner.lock:
            owner.gets += 1
            creds = dict(owner.creds)
        if not case.startswith("v1only-") and self.headers.get(TOKEN_HEADER) != owner.token:
            return self._send(401, "Unauthorized")
        if case == "badtoken":
            return self._send(401, "Unauthorized")
        base = "/latest/meta-data/iam/security-credentials/"
        if rest == "/latest/meta-data/placement/region":
            return self._send(200, owner.region)
        if rest == base:
            if case == "norole":
                return self._send(404, "Not Found")
            return self._send(200, owner.role + "\n")
        if rest != base + owner.role:
            return self._send(404, "Not Found")
        if case == "garbage":
            return self._send(200, "<html>certainly not json")
        if case == "codefail":
            creds["Code"] = "Failure"
        if case == "badexpiry":
            creds["Expiration"] = "2031-13-45T99:00:00Z"
        if case == "slowcreds":
            time.sleep(3)
        if case == "creds404":
            return self._send(404, "Not Found")
        if case == "huge":
            creds["Padding"] = "y" * (200 * 1024)
        return self._send(200, json.dumps(creds, indent=2))


class FakeImds(ThreadedHttpServer):
    """The tests' own IMDS (see the module docstring for its cases)."""

    handler = _FakeHandler
    thread_name = "fake-imds"

    def __init__(self, creds: dict | None = None, role: str = "s3lect-fake-role",
                 region: str = "ap-south-2"):
        super().__init__()
        self.creds = creds or imds_creds()
        self.role = role
        self.region = region
        self.token = secrets.token_urlsafe(32)
        self.puts = 0
        self.gets = 0
        self.lock = threading.Lock()

    def endpoint(self, case: str = "ok") -> str:
        return f"{self.base}/{case}"

    def set_creds(self, creds: dict) -> None:
        with self.lock:
            self.creds = dict(creds)


def with_metadata_servers(cmd: list[str], timeout_s: float = 600.0) -> int:
    env = dict(os.environ)
    container = ContainerCredsServer()
    fake = FakeImds()
    mock = None
    try:
        container.start()
        fake.start()
        c = container.creds
        env.update(S3LECT_TEST_CONTAINER_BASE=container.base,
                   S3LECT_TEST_CONTAINER_AKID=c["AccessKeyId"],
                   S3LECT_TEST_CONTAINER_SECRET=c["SecretAccessKey"],
                   S3LECT_TEST_CONTAINER_TOKEN=c["Token"],
                   S3LECT_TEST_CONTAINER_EXPIRATION=c["Expiration"],
                   S3LECT_TEST_CONTAINER_ROLE_ARN=c["RoleArn"],
                   S3LECT_TEST_FAKE_IMDS=fake.base,
                   S3LECT_TEST_FAKE_IMDS_AKID=fake.creds["AccessKeyId"],
                   S3LECT_TEST_FAKE_IMDS_SECRET=fake.creds["SecretAccessKey"],
                   S3LECT_TEST_FAKE_IMDS_SESSION=fake.token,
                   S3LECT_TEST_FAKE_IMDS_REGION=fake.region,
                   S3LECT_TEST_FAKE_IMDS_ROLE=fake.role)
        try:
            mock = ImdsMock(v2_only=True).start()
            m = mock.creds
            env.update(S3LECT_TEST_IMDS_MOCK=mock.endpoint,
                       S3LECT_TEST_IMDS_MOCK_AKID=m["AccessKeyId"],
                       S3LECT_TEST_IMDS_MOCK_SECRET=m["SecretAccessKey"],
                       S3LECT_TEST_IMDS_MOCK_TOKEN=m["Token"],
                       S3LECT_TEST_IMDS_MOCK_EXPIRATION=m["Expiration"],
                       S3LECT_TEST_IMDS_MOCK_ROLE=mock.role,
                       S3LECT_TEST_IMDS_MOCK_REGION=mock.region)
        except ImdsMockMissing as e:
            env["S3LECT_TEST_IMDS_MOCK_MISSING"] = str(e).replace("\n", " ")[:400]
        # Tests talk to loopback only and never through a proxy.
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
            env.pop(k, None)
        try:
            return subprocess.run(cmd, env=env, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            print(f"imds.py: {cmd[0]} ran longer than {timeout_s:.0f}s; killed", file=sys.stderr)
            return 1
    finally:
        if mock is not None:
            mock.stop()
        fake.stop()
        container.stop()


def main(argv: list[str]) -> int:
    # A SIGTERM (ctest's timeout) unwinds through the finally blocks that stop
    # the servers instead of leaving the mock running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if len(argv) >= 3 and argv[0] == "with-metadata-servers" and argv[1] == "--":
        return with_metadata_servers(argv[2:])
    print("usage: imds.py with-metadata-servers -- CMD [ARGS...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
