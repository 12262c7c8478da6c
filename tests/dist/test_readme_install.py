# SPDX-License-Identifier: Apache-2.0
"""README.md "Installing a release", run as written (issue 39 items 3 and 9;
suite dist).

Each ```sh block of the section that follows an `<!-- install-test: NAME -->`
line is run verbatim with `sh -e` in a directory of a clean root holding what
a user downloads: the artifacts scripts/dist made (S3LECT_DIST_DIR), their
SHA256SUMS signed by scripts/release-sign (the release workflow's signing
step) with a throwaway minisign key made here, and that key's public half as
minisign.pub. The verify block also has to fail on a SHA256SUMS or an
artifact changed after signing.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from artifacts import DIST, REPO, need, version
from roots import HOST_ARCH

BLOCKS = {"verify", "cli", "python", "sdk", "sdk-system"}


def blocks() -> dict[str, str]:
    text = (REPO / "README.md").read_text()
    return dict(re.findall(r"<!-- install-test: ([\w-]+) -->\n```sh\n(.*?)```", text, re.S))


def test_the_sections_blocks_are_the_tested_ones():
    """A block added, renamed or unmarked would go untested: fail instead.
    Every block installs this checkout's version."""
    b = blocks()
    assert set(b) == BLOCKS, f"README.md install-test blocks {sorted(b)}, tested {sorted(BLOCKS)}"
    for name, code in b.items():
        for v in re.findall(r"\bV=(\S+)", code):
            assert v == version(), (f"README.md's '{name}' block installs V={v}; this checkout is "
                                    f"{version()}: update the section")


def run_block(root, work: str, name: str, check: bool = True, env: dict | None = None):
    code = blocks()[name]
    e = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1"}
    e.update(env or {})
    r = root.run(["sh", "-ec", f"cd {work}\n{code}"], env=e, timeout=600, check=False)
    if check:
        assert r.returncode == 0, f"README block '{name}' failed in {root.name}:\n{code}\n" \
                                  f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r


def downloads(root, files: list[Path], sign: bool) -> tuple[str, Path]:
    """A fresh directory in ROOT with FILES (and, with SIGN, SHA256SUMS, its
    signature and minisign.pub): what the user downloaded."""
    t = f"/readme-{uuid.uuid4().hex[:8]}"
    work = root.host_path(t)
    work.mkdir()
    for f in files:
        shutil.copy2(f, work)
    if sign:
        if not shutil.which("minisign"):
            pytest.fail("minisign is not installed on the host (scripts/deps installs it)")
        sums = DIST / "SHA256SUMS"
        assert sums.is_file(), f"{sums}: scripts/dist writes it"
        shutil.copy2(sums, work)
        keys = work.parent / f"{t.strip('/')}-keys"  # outside the user's directory
        keys.mkdir()
        subprocess.run(["minisign", "-G", "-W", "-p", str(keys / "pub"), "-s", str(keys / "sec")],
                       check=True, capture_output=True, timeout=60)
        r = subprocess.run([str(REPO / "scripts" / "release-sign"), str(work), "--key",
                            str(keys / "sec"), "--pub", str(keys / "pub")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert (work / "SHA256SUMS.minisig").is_file()
        shutil.copy2(keys / "pub", work / "minisign.pub")
        shutil.rmtree(keys)
    return t, work


def test_verify_then_the_c_sdk_as_written(roots):
    """verify, sdk and sdk-system in the SDK root (gcc, pkg-config, minisign;
    no libcurl, no libssl), host architecture."""
    sdk = need(HOST_ARCH, "sdk")
    root = roots(f"sdk-bookworm-{HOST_ARCH}")
    t, work = downloads(root, sdk, sign=True)

    r = run_block(root, t, "verify")
    assert "Signature and comment signature verified" in r.stdout + r.stderr, r.stderr
    assert f"{sdk[0].name}: OK" in r.stdout, r.stdout

    r = run_block(root, t, "sdk")
    lines = r.stdout.split()
    assert lines.count(version()) == 2, f"hello and hello-static print the version: {r.stdout}"
    shared = root.run(["ldd", f"{t}/hello"], check=False).stdout
    assert re.search(r"libs3lect\.so\.0 => \S*" + re.escape(t), shared), \
        f"hello does not find libs3lect.so in the SDK through its rpath:\n{shared}"
    static = root.run(["sh", "-c", f"ldd {t}/hello-static || true"], check=False).stdout
    for lib in ("libs3lect", "libcurl", "libssl", "libcrypto", "libcjson"):
        assert lib not in static, f"hello-static needs {lib}:\n{static}"

    r = run_block(root, t, "sdk-system")
    assert r.stdout.split() == [version()], r.stdout
    assert root.host_path("/usr/local/lib/pkgconfig/s3lect.pc").is_file()


def test_verify_fails_on_changed_sums_or_artifact(roots):
    """The verify block is a check that can fail: a SHA256SUMS changed after
    signing fails minisign; an artifact changed after its sum fails sha256sum."""
    sdk = need(HOST_ARCH, "sdk")
    root = roots(f"sdk-bookworm-{HOST_ARCH}")
    t, work = downloads(root, sdk, sign=True)
    sums = (work / "SHA256SUMS").read_text()
    (work / "SHA256SUMS").write_text(sums.replace(" ", "  ", 1))  # one byte more
    r = run_block(root, t, "verify", check=False)
    assert r.returncode != 0, f"a changed SHA256SUMS verified:\n{r.stdout}\n{r.stderr}"
    assert "OK" not in r.stdout, "sha256sum ran after a failed signature check"

    t, work = downloads(root, sdk, sign=True)
    with open(work / sdk[0].name, "ab") as f:
        f.write(b"\0")
    r = run_block(root, t, "verify", check=False)
    assert r.returncode != 0 and f"{sdk[0].name}: FAILED" in r.stdout, (r.stdout, r.stderr)


def test_the_cli_and_the_wheel_as_written(roots):
    """cli and python in the bookworm root (no compiler, libcurl or libssl),
    host architecture: the static CLI lands in /usr/local with its man page
    and completion; the wheel installs into a venv and imports."""
    clis = [c for c in need(HOST_ARCH, "cli") if c.name.endswith(".tar.gz")]
    if not clis:
        pytest.skip(f"no static CLI tarball for {HOST_ARCH} in {DIST}")
    wheels = need(HOST_ARCH, "wheel")
    root = roots(f"bookworm-{HOST_ARCH}")
    t, work = downloads(root, clis + wheels, sign=False)

    r = run_block(root, t, "cli")
    assert r.stdout.startswith(f"s3lect {version()}"), r.stdout
    for p in ("/usr/local/bin/s3lect", "/usr/local/share/man/man1/s3lect.1",
              "/usr/local/share/bash-completion/completions/s3lect",
              "/usr/local/share/zsh/site-functions/_s3lect",
              "/usr/local/share/fish/vendor_completions.d/s3lect.fish"):
        assert root.host_path(p).is_file(), f"the cli block did not install {p}"

    r = run_block(root, t, "python")
    assert r.stdout.strip().splitlines()[-1] == version(), r.stdout
