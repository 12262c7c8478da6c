# SPDX-License-Identifier: Apache-2.0
"""`go get` of the Go binding builds with a C compiler alone (issue 29, item 3).

A program of a user's own, in a module of its own, requires
github.com/s3lect/s3lect/bindings/go with a `replace` to the module's
directory and is built with a fresh module cache and build cache
(GOMODCACHE, GOCACHE and GOPATH in a temp dir, GOFLAGS=-mod=mod) in an
environment with nothing of a built libs3lect in it: no PKG_CONFIG_PATH,
LD_LIBRARY_PATH, CGO_* or compiler search paths from the harness. The
package must compile libs3lect from its bundled sources
(scripts/gen-go-bundle) and link only libcurl, OpenSSL and cJSON. The
`replace` points at the module as a release publishes it: bindings/go alone
with the bundle, which the main tree does not commit, written by
`scripts/release-go-tree --out` from this checkout (its tests check that the
release commit holds exactly that), or, when S3LECT_GO_MODULE_DIR is set, the
directory it names (the release workflow extracts its tag's commit there). A
bundle that reached outside its module (../../libs3lect) would fail here.

The program elects itself on a file:// lock in a temp dir, prints that it
leads and the library's version, and stops. `go build` must print nothing
(no C compiler warnings), and the binary must not need libs3lect.so.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GO = shutil.which("go")
MODULE = "github.com/s3lect/s3lect/bindings/go"
RELEASE = ROOT / "scripts/release-go-tree"
GEN = ROOT / "scripts/gen-go-bundle"

pytestmark = pytest.mark.skipif(not GO, reason="needs Go (scripts/deps installs it)")

PROGRAM = """// SPDX-License-Identifier: Apache-2.0
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
)

func main() {
	lock := "file://" + os.Args[1] + "/leader.json"
	e, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{
		Config: &s3lect.ElectorConfig{LockfilePath: lock, ServerID: "go-get-node",
			LeaderTimeout: 3 * time.Second},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewS3Elector:", err)
		os.Exit(1)
	}
	if err := e.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "Start:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.WaitForLeadership(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "WaitForLeadership:", err)
		os.Exit(1)
	}
	fmt.Printf("leader=%v version=%s\\n", e.IsLeader(), s3lect.LibraryVersion())
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "Stop:", err)
		os.Exit(1)
	}
	fmt.Printf("stopped leader=%v\\n", e.IsLeader())
}
"""

# What may pass from the harness's environment: where things are and how to
# reach the network (the module proxy), nothing that points a compiler, the
# linker or pkg-config at a build of libs3lect.
KEEP = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "GOPROXY", "GONOSUMDB", "GONOPROXY",
        "GOPRIVATE", "GOSUMDB", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
        "https_proxy", "no_proxy", "CC")


def readme_commands() -> list[str]:
    """The sh block of bindings/go/README.md that points a program at a
    local checkout: its command lines."""
    text = (ROOT / "bindings/go/README.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        if "go mod edit -replace" in block:
            return [ln.strip() for ln in block.splitlines() if ln.strip()]
    raise AssertionError("bindings/go/README.md has no sh block with go mod edit -replace")


def header_version() -> str:
    text = (ROOT / "libs3lect/include/s3lect.h").read_text()
    m = re.search(r'^#define S3LECT_VERSION_STRING "([0-9.]+)"', text, re.M)
    assert m, "no S3LECT_VERSION_STRING in libs3lect/include/s3lect.h"
    return m.group(1)


def clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in KEEP}
    # No directory of the checkout's build trees on PATH either (a pkg-config
    # wrapper or a compiler there could bring one in).
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))
    env.update(GOPATH=str(tmp / "gopath"), GOMODCACHE=str(tmp / "gomodcache"),
               GOCACHE=str(tmp / "gocache"), GOFLAGS="-mod=mod", GOTOOLCHAIN="local",
               CGO_ENABLED="1", GOENV="off")
    env.setdefault("HOME", str(tmp))
    return env


def assert_no_libs3lect_installed(env: dict[str, str]) -> None:
    """The test proves nothing if pkg-config or the loader could find a
    libs3lect: say so rather than pass."""
    if shutil.which("pkg-config", path=env["PATH"]):
        r = subprocess.run(["pkg-config", "--exists", "s3lect"], env=env, timeout=30)
        assert r.returncode != 0, ("pkg-config finds an installed s3lect.pc: this test needs "
                                   "a machine where libs3lect is not installed")
    ld = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, timeout=30) \
        if Path("/sbin/ldconfig").exists() else None
    if ld is not None and ld.returncode == 0:
        assert "libs3lect" not in ld.stdout, ("the loader's cache has a libs3lect: this test "
                                              "needs a machine where libs3lect is not installed")


def run(cmd, cwd, env, timeout, what):
    try:
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{what}: no result within {timeout}s: {' '.join(map(str, cmd))}\n"
                             f"{(e.stdout or b'')[-3000:]!r}\n{(e.stderr or b'')[-3000:]!r}")
    assert r.returncode == 0, (f"{what} failed (exit {r.returncode}): {' '.join(map(str, cmd))}"
                               f"\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}")
    return r


def test_go_get_builds_with_a_c_compiler_alone(tmp_path):
    env = clean_env(tmp_path)
    assert_no_libs3lect_installed(env)
    # The module as a release tag holds it: bindings/go alone, with the bundle.
    if os.environ.get("S3LECT_GO_MODULE_DIR"):
        mod = Path(os.environ["S3LECT_GO_MODULE_DIR"]).resolve()
        assert (mod / "go.mod").is_file() and (mod / "libs3lect_bundle.go").is_file(), \
            f"S3LECT_GO_MODULE_DIR={mod} holds no module with its bundle"
    else:
        mod = tmp_path / "module"
        run([sys.executable, str(RELEASE), "--out", str(mod)], ROOT, None, 300,
            "scripts/release-go-tree --out")
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.go").write_text(PROGRAM)
    started = time.monotonic()
    run([GO, "mod", "init", "example.com/gogetcheck"], app, env, 60, "go mod init")
    # The README's commands, as written there (issue 39 item 4), with the
    # checkout's path in place of its placeholder. A `replace` by a directory
    # stands for any version; without a required version `go get` would ask
    # the proxy for the latest release.
    lines = readme_commands()
    assert lines == ["/path/to/s3lect/scripts/gen-go-bundle",
                     f"go mod edit -replace {MODULE}=/path/to/s3lect/bindings/go",
                     f"go get {MODULE}@v0.0.0", "go build ./..."], lines
    # The first line writes the bundle into the checkout; here the module
    # already holds one, which must be what that line makes.
    run([sys.executable, str(GEN), "--check", "--out", str(mod)], ROOT, None, 120,
        "scripts/gen-go-bundle --check --out (the README's first line)")
    for line in lines[1:]:
        argv = line.replace("/path/to/s3lect/bindings/go", str(mod)).split()
        r = run([GO, *argv[1:]], app, env, 900, line)
        if argv[1] == "build":  # the first build: C compiler warnings show here
            assert r.stdout.strip() == "" and r.stderr.strip() == "", \
                f"{line} printed something (a C compiler warning?):\n{r.stdout}\n{r.stderr}"
    exe = tmp_path / "gogetcheck"
    r = run([GO, "build", "-o", str(exe), "."], app, env, 900, "go build")
    build_s = time.monotonic() - started
    # Warnings of the C compiler appear on go build's output.
    assert r.stdout.strip() == "" and r.stderr.strip() == "", \
        f"go build printed something (a C compiler warning?):\n{r.stdout}\n{r.stderr}"

    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, timeout=30)
    assert ldd.returncode == 0, ldd.stderr
    assert "libs3lect" not in ldd.stdout, f"the program links libs3lect.so:\n{ldd.stdout}"
    assert "not found" not in ldd.stdout, f"the program misses a library:\n{ldd.stdout}"
    for lib in ("libcurl", "libcrypto", "libcjson"):
        assert lib in ldd.stdout, f"the program does not link {lib}:\n{ldd.stdout}"
    nm = subprocess.run(["go", "tool", "nm", str(exe)], capture_output=True, text=True,
                        env=env, timeout=60)
    assert re.search(r" [Tt] s3lect_new$", nm.stdout, re.M), \
        "libs3lect's s3lect_new is not inside the program"

    locks = tmp_path / "locks"
    locks.mkdir()
    r = run([str(exe), str(locks)], tmp_path,
            {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, 60, "the program")
    assert f"leader=true version={header_version()}" in r.stdout, r.stdout + r.stderr
    assert "stopped leader=false" in r.stdout, r.stdout + r.stderr
    assert (locks / "leader.json").exists(), "the file store wrote no lock"
    print(f"go get + go build in a fresh module and build cache: {build_s:.1f}s")
