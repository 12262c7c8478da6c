# SPDX-License-Identifier: Apache-2.0
"""The deployment examples run (issue 19, "Examples that run").

examples/systemd: `systemd-analyze verify` accepts the unit (ExecStart pointed
at the built CLI) without a word about it; the settings that keep the
supervisor's guarantees are there (KillMode=mixed, a TimeoutStopSec above the
worst stop computed as in docs/cli.md, Restart=on-failure); every S3LECT_*
name of the example environment file is an option of `s3lect run --help`, and
the CLI started with that file (the lock swapped for a file lock, ports for
free loopback ones) leads, serves metrics and exits 0 on SIGTERM.

examples/kubernetes: tests/examples/k8scheck (Go, k8s.io/api types) decodes
every document strictly into its typed object and checks the example's
invariants; broken copies (an unknown field, an unknown kind, a broken
invariant) must fail it, so the check can fail. The checker is built once per
source hash into ${S3LECT_CACHE:-~/.cache/s3lect}/k8scheck/; its modules come
from the Go module proxy, a real dependency: unreachable, the test fails.

Loopback only; every process has a timeout.
"""
from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from harness.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
SYSTEMD = ROOT / "examples" / "systemd"
UNIT = SYSTEMD / "s3lect-cron.service"
ENV_FILE = SYSTEMD / "cron.env"
K8S_YAML = ROOT / "examples" / "kubernetes" / "s3lect.yaml"
CHECKER_SRC = ROOT / "tests" / "examples" / "k8scheck"
REQUEST_TIMEOUT = 10.0  # s, the CLI's S3 request timeout (docs/s3.md)
CACHE = Path(os.environ.get("S3LECT_CACHE") or Path.home() / ".cache" / "s3lect")


# ---------------------------------------------------------------- helpers

def parse_duration(text: str) -> float:
    """s3lect's duration syntax (docs/cli.md): number-unit pairs, in seconds."""
    if text == "0":
        return 0.0
    pairs = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    assert pairs and "".join(n + u for n, u in pairs) == text, f"not a duration: {text!r}"
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in pairs)


def worst_stop(lease: float) -> tuple[float, float]:
    """(kill timeout, worst stop time) for lease L with the derived deadline:
    D = floor(2L/3), margin = 2L/1000 + 250 ms, kill timeout = L - D - margin;
    a stop may wait for one store request in flight, the kill timeout, and the
    release request."""
    ms = round(lease * 1000)
    deadline = (2 * ms) // 3
    margin = 2 * ms / 1000 + 250
    kill = (ms - deadline - margin) / 1000
    return kill, REQUEST_TIMEOUT + kill + REQUEST_TIMEOUT


def read_unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None,
                                   comment_prefixes=("#", ";"), empty_lines_in_values=False)
    cp.optionxform = str  # systemd keys are case-sensitive
    cp.read_string(path.read_text())
    return cp


def read_env_file(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, sep, v = line.partition("=")
        assert sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", k), f"bad line in {path}: {line!r}"
        env[k] = v
    return env


def run_options() -> set[str]:
    text = subprocess.run([str(BIN), "run", "--help"], capture_output=True, text=True,
                          timeout=20).stdout
    opts = set(re.findall(r"^\s+(--[a-z][a-z-]+)", text, re.M)) - {"--help"}
    assert {"--lock", "--peer", "--metrics-listen", "--log-format"} <= opts, opts
    return opts


@pytest.fixture
def clean_env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}
    e["HOME"] = str(tmp_path)
    return e


# ---------------------------------------------------------------- systemd

def test_systemd_unit_verifies(tmp_path):
    """`systemd-analyze verify` accepts the unit with ExecStart at the built CLI
    and says nothing about it (an unknown key or bad value is only a warning,
    so the output is checked, not just the exit status)."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (package systemd)")
    assert BIN.exists(), f"{BIN} not built"
    env_file = tmp_path / "cron.env"
    shutil.copy(ENV_FILE, env_file)
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/s3lect run " in text
    text = text.replace("/usr/local/bin/s3lect", str(BIN))
    text = text.replace("EnvironmentFile=/etc/s3lect/cron.env", f"EnvironmentFile={env_file}")
    unit = tmp_path / UNIT.name
    unit.write_text(text)
    env = dict(os.environ, SYSTEMD_LOG_LEVEL="info", SYSTEMD_LOG_COLOR="0")
    r = subprocess.run([tool, "verify", "--man=no", str(unit)], capture_output=True, text=True,
                       timeout=60, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    about_us = [line for line in out.splitlines() if UNIT.name in line or str(BIN) in line]
    assert not about_us, "\n".join(about_us)

    # The same check with a broken copy speaks up, so silence above means something.
    bad = tmp_path / "bad.service"
    bad.write_text(text.replace("KillMode=mixed", "KillMode=mixd\nTimeoutStopSecs=1"))
    r = subprocess.run([tool, "verify", "--man=no", str(bad)], capture_output=True, text=True,
                       timeout=60, env=env)
    assert "kill mode" in r.stderr and "TimeoutStopSecs" in r.stderr, r.stdout + r.stderr


def test_systemd_unit_keeps_the_supervisor_guarantees():
    unit = read_unit(UNIT)
    svc = unit["Service"]
    # systemd must signal only s3lect and let it stop the tree and release;
    # `process` would leave stragglers even after the timeout, `control-group`
    # would SIGTERM the command behind s3lect's back.
    assert svc["KillMode"] == "mixed"
    assert svc.get("KillSignal", "SIGTERM") == "SIGTERM"
    assert svc.get("SendSIGKILL", "yes") == "yes"
    env = read_env_file(ENV_FILE)
    lease = parse_duration(env.get("S3LECT_LEASE_TIMEOUT", "15s"))
    kill, worst = worst_stop(lease)
    assert abs(worst_stop(15.0)[0] - 4.72) < 1e-9  # the value docs/cli.md states
    stop = parse_duration(svc["TimeoutStopSec"])
    assert stop > worst + 5, (f"TimeoutStopSec={stop}s must exceed the worst stop "
                              f"{worst:.2f}s (request + kill timeout {kill:.2f}s + release)")
    assert svc["Restart"] == "on-failure"
    assert parse_duration(svc["RestartSec"]) >= 1
    assert "2" in svc["RestartPreventExitStatus"].split()
    assert svc["NoNewPrivileges"] == "yes"
    assert svc["ProtectSystem"] == "strict"
    assert svc["EnvironmentFile"] == "/etc/s3lect/cron.env"
    argv = svc["ExecStart"].split()
    assert argv[0].endswith("/s3lect") and argv[1] == "run" and "--" in argv
    assert len(argv) > argv.index("--") + 1, "a command after --"
    # /proc must stay visible to the unit's own processes (s3lect walks it).
    assert svc.get("ProcSubset", "all") == "all"
    assert svc.get("ProtectProc", "default") in ("default", "invisible", "noaccess")
    assert "network-online.target" in unit["Unit"]["After"]


def test_env_file_names_are_run_options():
    opts = run_options()
    env = read_env_file(ENV_FILE)
    names = [k for k in env if k.startswith("S3LECT_")]
    assert {"S3LECT_LOCK", "S3LECT_PEER", "S3LECT_METRICS_LISTEN", "S3LECT_LOG_FORMAT"} <= set(names)
    for name in names:
        opt = "--" + name[len("S3LECT_"):].lower().replace("_", "-")
        assert opt in opts, f"{name} in {ENV_FILE.name} is not an option of `s3lect run`: {opt}"
    assert env["S3LECT_PEER"] == "1"
    assert env["S3LECT_LOG_FORMAT"] == "json"


def test_env_file_starts_the_cli(tmp_path, clean_env):
    """The CLI with the example environment (file lock, free loopback ports)
    acquires leadership, serves metrics, and exits 0 on SIGTERM within the
    unit's TimeoutStopSec."""
    env = dict(clean_env)
    env.update(read_env_file(ENV_FILE))
    env["S3LECT_LOCK"] = str(tmp_path / "lock.json")
    mport = free_port()
    env["S3LECT_PEER_LISTEN"] = f"127.0.0.1:{free_port()}"
    env["S3LECT_METRICS_LISTEN"] = f"127.0.0.1:{mport}"
    env["S3LECT_ID"] = "cron-1"
    p = subprocess.Popen([str(BIN), "run", "--", "sleep", "30"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        time.sleep(2)
        assert p.poll() is None, p.communicate(timeout=10)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        assert re.search(r'^s3lect_leader\{[^}]*id="cron-1"[^}]*\} 1$', metrics, re.M), metrics
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    assert p.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines()]  # json: every line parses
    msgs = [line["msg"] for line in lines]
    assert any(m.startswith("acquired leadership term=") and "id=cron-1" in m for m in msgs), msgs
    assert any(m.startswith("lost leadership") and "reason=stopped" in m for m in msgs), msgs
    stop = parse_duration(read_unit(UNIT)["Service"]["TimeoutStopSec"])
    assert took < stop, f"stop took {took:.1f}s"
    assert json.loads((tmp_path / "lock.json").read_text())["leaderID"] in ("", "cron-1")


# ---------------------------------------------------------------- Kubernetes

def checker_sources() -> list[Path]:
    return sorted(p for p in CHECKER_SRC.iterdir() if p.suffix == ".go" or p.name in ("go.mod", "go.sum"))


@pytest.fixture(scope="module")
def k8scheck() -> Path:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        pytest.skip("the Go toolchain is not installed (needed to build tests/examples/k8scheck)")
    h = hashlib.sha256()
    for p in checker_sources():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    out = CACHE / "k8scheck" / h.hexdigest()[:16] / "k8scheck"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"k8scheck.tmp{os.getpid()}")
    env = dict(os.environ, GOFLAGS="-mod=readonly", CGO_ENABLED="0")
    r = subprocess.run([go, "build", "-trimpath", "-o", str(tmp), "."], cwd=CHECKER_SRC, env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        text = r.stdout + r.stderr
        if re.search(r"proxy\.golang|dial tcp|lookup |no such host|connection refused|i/o timeout|"
                     r"TLS handshake|network is unreachable", text):
            pytest.fail("the Go module proxy cannot be reached to fetch k8s.io/api and "
                        f"sigs.k8s.io/yaml (GOPROXY={os.environ.get('GOPROXY', 'default')}):\n{text}")
        pytest.fail(f"building tests/examples/k8scheck failed:\n{text}")
    tmp.replace(out)
    return out


def check(k8scheck: Path, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(k8scheck), str(path)], capture_output=True, text=True, timeout=60)


def test_kubernetes_example_passes_the_checker(k8scheck):
    r = check(k8scheck, K8S_YAML)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_kubernetes_example_lease_arithmetic():
    """The grace period in the YAML, read without the checker, is above the
    worst stop for the default lease (the example sets no --lease-timeout)."""
    text = K8S_YAML.read_text()
    assert "lease-timeout" not in text and "LEASE_TIMEOUT" not in text
    grace = int(re.search(r"^\s+terminationGracePeriodSeconds: (\d+)$", text, re.M).group(1))
    assert grace > worst_stop(15.0)[1] + 5


BROKEN = {
    # name: (replace this, with that, the checker's complaint)
    "unknown_field": ("      serviceAccountName: s3lect-job\n",
                      "      serviceAccountName: s3lect-job\n      serviceAccount_Name: x\n",
                      'unknown field "serviceAccount_Name"'),
    "unknown_field_in_container": ("          imagePullPolicy: IfNotPresent\n",
                                   "          imagePullPolicy: IfNotPresent\n          restart: Always\n",
                                   'unknown field "restart"'),
    "unknown_kind": ("apiVersion: v1\nkind: ServiceAccount\n",
                     "apiVersion: v1\nkind: ServiceAcount\n", 'unknown kind "ServiceAcount"'),
    "two_replicas": ("  replicas: 3\n", "  replicas: 2\n", "want replicas: 3"),
    "no_peer": ("            - --peer\n", "", "peer mode is off"),
    "pod_ip_from_spec": ("fieldPath: status.podIP", "fieldPath: spec.nodeName",
                         "POD_IP must come from fieldRef status.podIP"),
    "short_grace": ("terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 20",
                    "terminationGracePeriodSeconds must exceed"),
    "no_irsa": ("eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/s3lect-job",
                "example.com/role: x", "is not an IAM role ARN"),
    "root": ("        runAsNonRoot: true\n", "        runAsNonRoot: false\n", "runAsNonRoot must be true"),
    "probe_on_peer": ("              path: /healthz\n              port: metrics\n",
                      "              path: /health/leadership\n              port: peer\n",
                      "livenessProbe must GET /healthz"),
    "liveness_on_leader": ("              path: /healthz\n", "              path: /leader\n",
                           "livenessProbe must GET /healthz"),
    "readiness_on_metrics": ("              path: /leader\n", "              path: /metrics\n",
                             "readinessProbe must GET /leader"),
    "rollout_keeps_a_pod": ("      maxUnavailable: 100%\n", "      maxUnavailable: 1\n",
                            "rollingUpdate.maxUnavailable must be 100%"),
    "api_token": ("      automountServiceAccountToken: false\n",
                  "      automountServiceAccountToken: true\n",
                  "automountServiceAccountToken must be false"),
    "a_budget": ("      targetPort: app\n      protocol: TCP\n",
                 "      targetPort: app\n      protocol: TCP\n---\napiVersion: policy/v1\n"
                 "kind: PodDisruptionBudget\nmetadata:\n  name: pdb\nspec:\n  maxUnavailable: 1\n"
                 "  selector:\n    matchLabels:\n      app.kubernetes.io/name: s3lect-job\n",
                 "PodDisruptionBudget pdb selects the pods"),
    "no_service": ("  selector:\n    app.kubernetes.io/name: s3lect-job\n",
                   "  selector:\n    app.kubernetes.io/name: other\n", "no Service selects its pods"),
    "service_to_followers": ("  type: ClusterIP\n", "  type: ClusterIP\n  publishNotReadyAddresses: true\n",
                             "publishNotReadyAddresses would route to the followers"),
    "service_to_no_port": ("      targetPort: app\n", "      targetPort: web\n",
                           "targetPort web is not a port of the pods"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_kubernetes_checker_rejects_a_broken_copy(k8scheck, tmp_path, case):
    old, new, complaint = BROKEN[case]
    text = K8S_YAML.read_text()
    assert text.count(old) == 1, f"{case}: {old!r} not found once in the example"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new))
    r = check(k8scheck, bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert complaint in r.stdout, r.stdout + r.stderr
