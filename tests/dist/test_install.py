# SPDX-License-Identifier: Apache-2.0
"""Install tests on clean Debian roots (issue 29 item 2; suite dist).

The release artifacts (S3LECT_DIST_DIR, default dist/: what scripts/dist
makes) are installed and run inside Debian minbase roots that have no C
compiler, no libcurl and no libssl (roots.py), amd64 and arm64, the
foreign one under qemu-user:
  - the wheel: pip-installed into a fresh venv of the root's own CPython
    (bullseye's 3.9, bookworm's 3.11, trixie's 3.13), imported, and electing against the
    harness's MinIO on 127.0.0.1 beside an s3lect node outside the root; it
    hands over to that node when stopped;
  - the static CLI: two nodes in the root elect one leader; SIGTERM to it
    ends its command before the other starts its own;
  - the C SDK: its files, for its architecture (compiled and linked
    against, shared and static, by README.md's own commands in
    test_readme_install.py).
Every skip says why (no artifact for an architecture, no qemu, a kernel
without binfmt_misc in user namespaces).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from artifacts import DIST, SPECS, USED, WHEEL_ROOTS, artifacts, need, unpack_cli
from roots import HOST_ARCH, MACHINE, tar_members, unclean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.cli import FAST, status_json, wait_for  # noqa: E402

ARCHES = ["amd64", "arm64"]
# Under qemu-user everything is slower (venv and pip in the arm64 root: 21 s, not 3).
SLOW = {a: (1 if a == HOST_ARCH else 4) for a in ARCHES}


def _lock(minio, what: str) -> str:
    return f"s3://{minio.bucket}/dist/{what}-{uuid.uuid4().hex[:8]}.json"


def _minio_env(minio) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": minio.access_key, "AWS_SECRET_ACCESS_KEY": minio.secret_key,
            "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": minio.endpoint}


def _host_env(minio, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "S3LECT_TEST_"))}
    env.update(_minio_env(minio))
    env["HOME"] = str(tmp_path)
    return env




@pytest.mark.parametrize("name", USED)
def test_root_has_no_compiler_libcurl_or_libssl(roots, name):
    """What the other tests rely on: the cached root is clean (gcc only in
    the SDK test's roots), and it has the packages it was made with."""
    arch = SPECS[name].arch
    if not any(artifacts(arch).values()):  # the release job has only its runner's
        pytest.skip(f"no artifacts for {MACHINE[arch]} in {DIST}: {name} is not needed")
    root = roots(name)
    members = tar_members(SPECS[name].tarball())
    sdk = name.startswith("sdk-")
    assert unclean(members, compiler_allowed=sdk) == []
    if sdk:
        assert any(m.endswith("/bin/gcc") for m in members), "no gcc in the SDK root"
    else:
        assert any(re.search(r"/bin/python3\.\d+$", m) for m in members), "no python3"
    # The root's programs run here, under qemu for the foreign architecture.
    r = root.run(["uname", "-m"], timeout=120 * SLOW[root.arch])
    assert r.stdout.strip() == MACHINE[root.arch], r.stdout


ELECT = """
import os, sys, time
import s3lect

print("python", sys.version.split()[0], "s3lect", s3lect.__version__,
      "from", s3lect._core.__file__, flush=True)
work = sys.argv[1]
e = s3lect.Elector(sys.argv[2], server_id="in-root", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"],
                   region_name="us-east-1", lease_timeout=3, renew_interval=1,
                   renew_deadline=2, frequent_interval=0.5, infrequent_interval=1,
                   max_clock_skew=0)
e.start()
if not e.wait_for_leadership(timeout=60):
    print("never led:", e.last_error, flush=True)
    sys.exit(3)
print("LEADER term", e.term, flush=True)
# Leads until told to stop; it must keep leading all that time.
while not os.path.exists(os.path.join(work, "stop")):
    if not e.is_leader:
        print("LOST leadership while it should lead:", e.last_error, flush=True)
        sys.exit(4)
    time.sleep(0.1)
with open(os.path.join(work, "stop-called"), "w") as f:
    f.write(repr(time.time()))
e.stop()
assert not e.is_leader
print("STOPPED", flush=True)
"""


@pytest.mark.parametrize("name", WHEEL_ROOTS)
def test_wheel_installs_and_elects_beside_a_node_outside(roots, name, minio, host_cli,
                                                          tmp_path):
    arch = SPECS[name].arch
    wheels = need(arch, "wheel")
    root = roots(name)
    slow = SLOW[arch]
    t = f"/wheel-{uuid.uuid4().hex[:8]}"
    work = root.host_path(t)
    (work / "wheels").mkdir(parents=True)
    for w in wheels:
        shutil.copy2(w, work / "wheels")
    (work / "elect.py").write_text(ELECT)

    start = time.monotonic()
    root.run(["python3", "-m", "venv", f"{t}/venv"], timeout=300 * slow)
    r = root.run([f"{t}/venv/bin/python", "-m", "pip", "install", "--no-index",
                  "--disable-pip-version-check", "--find-links", f"{t}/wheels", "s3lect"],
                 timeout=300 * slow, check=False)
    assert r.returncode == 0, (f"pip found no wheel among {[w.name for w in wheels]} for this "
                               f"root's CPython:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    installed = re.search(r"Successfully installed (s3lect-\S+)", r.stdout)
    print(f"{name}: venv and pip install in {time.monotonic() - start:.1f}s: "
          f"{installed.group(1) if installed else r.stdout[-300:]}")

    lock = _lock(minio, name)
    env = _minio_env(minio)
    inside = root.popen([f"{t}/venv/bin/python", f"{t}/elect.py", t, lock], env=env,
                        stdout=open(tmp_path / "inside.log", "w"), stderr=subprocess.STDOUT,
                        start_new_session=True)
    out = lambda: (tmp_path / "inside.log").read_text(errors="replace")  # noqa: E731
    host = None
    try:
        wait_for(lambda: "LEADER" in out() or inside.poll() is not None, 90 * slow,
                 "the elector in the root to lead")
        assert "LEADER" in out(), out()
        assert f"{t}/venv/" in out(), f"s3lect was not loaded from the venv:\n{out()}"
        starts = tmp_path / "starts"
        host_log = tmp_path / "outside.log"
        host = subprocess.Popen(
            [str(host_cli), "run", "--lock", lock, "--id", "outside", *FAST, "--", "sh", "-c",
             f'echo "outside $(date +%s.%N)" >> {starts}; exec sleep 600'],
            env=_host_env(minio, tmp_path), stdout=open(host_log, "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        # The outside node follows: the lock names the elector in the root.
        wait_for(lambda: status_json(host_cli, lock, _host_env(minio, tmp_path))[1]
                 .get("leaderID") == "in-root", 30, "status to name the leader in the root")
        time.sleep(4)  # a lease and more: the outside node must not take over
        assert not starts.exists(), host_log.read_text()
        assert host.poll() is None and inside.poll() is None, out()
        (work / "stop").write_text("")
        wait_for(starts.exists, 20 * slow, "the outside node to lead after the stop")
        assert inside.wait(timeout=60 * slow) == 0, out()
        assert "STOPPED" in out(), out()
        # The outside node's command started after the elector in the root
        # was told to stop (until then it led: its loop checked is_leader).
        stop_called = float((work / "stop-called").read_text())
        started = float(starts.read_text().split()[1])
        assert started > stop_called, (started, stop_called)
        print(f"{name}: {out().splitlines()[0]}; the outside node led "
              f"{started - stop_called:.2f}s after the stop call")
    finally:
        if inside.poll() is None:
            os.killpg(inside.pid, signal.SIGKILL)
            inside.wait(timeout=30)
        if host is not None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait(timeout=30)


def _cli_cmd(t: str) -> str:
    # The leader's command: fails loudly (OVERLAP) when the previous leader's
    # command still runs as it starts; records its pid for the test.
    return (f'prev=$(tail -n 1 {t}/cmd.log 2>/dev/null | cut -d" " -f4); '
            f'if [ -n "$prev" ] && kill -0 "$prev" 2>/dev/null; then '
            f'echo "OVERLAP $prev" >> {t}/cmd.log; fi; '
            f'echo "start $S3LECT_LEADER_ID $S3LECT_TERM $$" >> {t}/cmd.log; exec sleep 600')


@pytest.mark.parametrize("arch", ARCHES)
def test_static_cli_elects_and_hands_over_on_sigterm(roots, arch, minio, tmp_path):
    clis = need(arch, "cli")
    root = roots(f"bookworm-{arch}")
    slow = SLOW[arch]
    t = f"/cli-{uuid.uuid4().hex[:8]}"
    work = root.host_path(t)
    work.mkdir()
    binary = unpack_cli(clis[0], work / "bin")
    inside_bin = "/" + str(binary.relative_to(root.path))
    r = root.run([inside_bin, "--version"], timeout=60 * slow)
    print(f"{arch}: {clis[0].name}: {r.stdout.strip()}")
    assert r.stdout.startswith("s3lect "), r.stdout

    lock = _lock(minio, f"cli-{arch}")
    env = _minio_env(minio)
    procs: dict[str, subprocess.Popen] = {}
    logs = {n: tmp_path / f"{n}.log" for n in ("a", "b")}
    marker = work / "cmd.log"

    def text(n):
        return logs[n].read_text(errors="replace")

    def starts():
        if not marker.exists():
            return []
        return [ln.split() for ln in marker.read_text().splitlines()]

    ok = False
    try:
        for n in ("a", "b"):
            procs[n] = root.popen([inside_bin, "run", "--lock", lock, "--id", n, *FAST,
                                   "--kill-timeout", "500ms", "--", "sh", "-c", _cli_cmd(t)],
                                  env=env, stdout=open(logs[n], "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: starts() or any(p.poll() is not None for p in procs.values()),
                 60 * slow, "a leader's command to start")
        assert all(p.poll() is None for p in procs.values()), "a node exited"
        time.sleep(3)  # more than a poll of the follower: still one command
        s = starts()
        assert len(s) == 1 and s[0][0] == "start", s
        leader, term, child = s[0][1], int(s[0][2]), int(s[0][3])
        follower = "b" if leader == "a" else "a"
        assert procs[follower].poll() is None, text(follower)
        t0 = time.monotonic()
        procs[leader].send_signal(signal.SIGTERM)
        assert procs[leader].wait(timeout=30 * slow) == 0, text(leader)
        assert not Path(f"/proc/{child}").exists() or \
            "sleep" not in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"), \
            "the stopped leader's command still runs"
        wait_for(lambda: len(starts()) >= 2, 30 * slow, "the follower's command to start")
        took = time.monotonic() - t0
        s = starts()
        assert [x[0] for x in s] == ["start", "start"], s  # no OVERLAP line
        assert s[1][1] == follower and int(s[1][2]) > term, s
        print(f"{arch}: SIGTERM handover {leader} -> {follower} in {took:.1f}s")
        ok = True
    finally:
        if not ok:
            for n in logs:
                print(f"---- node {n}:\n{text(n)[-3000:]}")
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        # The followers' commands (sleep 600) die with their s3lect: none is left.
        for x in starts():
            if len(x) >= 4 and x[0] == "start":
                try:
                    os.kill(int(x[3]), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass




ELF_MACHINE = {"amd64": 0x3E, "arm64": 0xB7}


@pytest.mark.parametrize("arch", ARCHES)
def test_sdk_holds_its_files_for_its_architecture(arch, tmp_path):
    """Both SDKs' contents (the host's is also compiled against below)."""
    sdks = need(arch, "sdk")
    subprocess.run(["tar", "-xf", str(sdks[0]), "-C", str(tmp_path)], check=True)
    pcs = sorted(tmp_path.rglob("lib/pkgconfig/s3lect.pc"))
    assert len(pcs) == 1, f"{sdks[0].name}: s3lect.pc: {pcs}"
    prefix = pcs[0].parents[2]
    assert (prefix / "include" / "s3lect.h").is_file()
    assert list(prefix.glob("lib/cmake/s3lect/*onfig.cmake")), "no CMake package"
    assert list(prefix.glob("share/man/man1/s3lect.1*")), "no man page"
    for lib in ("libs3lect.a", "libs3lect.so"):
        assert (prefix / "lib" / lib).exists(), f"{sdks[0].name}: no lib/{lib}"
    head = (prefix / "lib" / "libs3lect.so").read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == ELF_MACHINE[arch]


@pytest.mark.parametrize("arch", ARCHES)
def test_static_cli_ships_its_completion(arch, tmp_path):
    """The static CLI's tarball carries bash, zsh and fish completion where
    the shells look under its prefix (issue 39 item 5), and the bash one
    completes as documented."""
    clis = [c for c in need(arch, "cli") if c.name.endswith((".tar.gz", ".tar.xz", ".tgz"))]
    if not clis:
        pytest.skip(f"no static CLI tarball for {arch} (a bare binary carries no completion)")
    subprocess.run(["tar", "-xf", str(clis[0]), "-C", str(tmp_path)], check=True)
    found = {rel: list(tmp_path.rglob(rel)) for rel in (
        "share/bash-completion/completions/s3lect", "share/zsh/site-functions/_s3lect",
        "share/fish/vendor_completions.d/s3lect.fish")}
    missing = [rel for rel, got in found.items() if len(got) != 1]
    assert not missing, f"{clis[0].name} lacks {missing}"
    bash = found["share/bash-completion/completions/s3lect"][0]
    r = subprocess.run(["bash", "-c", f'source "{bash}"; COMP_WORDS=(s3lect run --log-format ""); '
                        'COMP_CWORD=3; _s3lect; echo "${COMPREPLY[*]}"'],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "text json", (r.stdout, r.stderr)


@pytest.mark.parametrize("arch", ARCHES)
def test_sbom_names_s3lects_own_source(arch):
    """The SBOM's s3lect package says where its source is: the repository and
    the commit the artifacts were built from (issue 39 item 9)."""
    import json
    sboms = sorted(DIST.glob(f"s3lect-*-{MACHINE[arch]}.spdx.json"))
    if not sboms:
        pytest.skip(f"no SBOM for {MACHINE[arch]} in {DIST}: scripts/dist --arch "
                    f"{MACHINE[arch]} makes it")
    doc = json.loads(sboms[-1].read_text())
    s3 = next(p for p in doc["packages"] if p["SPDXID"] == "SPDXRef-s3lect")
    m = re.fullmatch(r"built from commit ([0-9a-f]{40})(-dirty)? of https://github.com/s3lect/s3lect",
                     s3.get("sourceInfo", ""))
    assert m, s3
    assert s3["homepage"] == "https://github.com/s3lect/s3lect", s3
    want = "NOASSERTION" if m.group(2) else f"git+https://github.com/s3lect/s3lect@{m.group(1)}"
    assert s3["downloadLocation"] == want, s3
