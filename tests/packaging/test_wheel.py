# SPDX-License-Identifier: Apache-2.0
"""The self-contained wheel (issue 19): `auditwheel show` finds nothing but
glibc, and the wheel installs into a fresh venv and runs an election against
MinIO inside a mount namespace from which the system's libcurl, cJSON,
OpenSSL libraries, their pkg-config files and every -dev header are absent
(an overlay whiteout for each library file, an empty /usr/include).

Needs the wheel made by scripts/build-wheel (S3LECT_WHEEL_DIR; the
`selfcontained` suite makes it) and root for the mount namespace.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WHEEL_DIR = Path(os.environ.get("S3LECT_WHEEL_DIR", "/nonexistent"))
# The newest wheel there (scripts/build-wheel deletes nothing in its OUT_DIR,
# so wheels of earlier versions can sit beside it), and its auditwheel text.
WHEELS = sorted(WHEEL_DIR.glob("s3lect-*-manylinux_*.whl"), key=lambda p: p.stat().st_mtime,
                reverse=True)
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
HIDDEN = ("libcurl", "libcjson", "libssl", "libcrypto", "libpq")

pytestmark = pytest.mark.skipif(
    not WHEELS, reason="no wheel: run scripts/build-wheel and set S3LECT_WHEEL_DIR "
                       "(scripts/test selfcontained does both)")


def test_auditwheel_finds_only_glibc():
    show = WHEELS[0].with_name(WHEELS[0].name[:-len(".whl")] + ".auditwheel-show.txt").read_text()
    m = re.search(r'consistent with\s+the following platform tag: "(manylinux_2_(\d+)_\w+)"',
                  show)
    assert m, show
    assert m.group(1) in WHEELS[0].name, (m.group(1), WHEELS[0].name)
    libs = re.search(r"system-provided shared libraries:(.*?)(?:\n\n|This constrains)", show,
                     re.S)
    names = set(re.findall(r"(lib[\w+-]+\.so\.\d+)", libs.group(1) if libs else ""))
    assert names and names <= {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
                               "librt.so.1"}, show
    assert "libcurl" not in show and "libssl" not in show and "libcjson" not in show


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="the mount namespace needs root and unshare(1)")
def test_wheel_runs_where_libcurl_and_dev_packages_are_absent(tmp_path, minio):
    assert LIBDIR.is_dir(), f"{LIBDIR} is not this machine's library directory"
    upper, work = tmp_path / "upper", tmp_path / "work"
    upper.mkdir()
    work.mkdir()
    hidden = sorted(p.name for p in LIBDIR.iterdir() if p.name.startswith(HIDDEN))
    assert any(h.startswith("libcurl") for h in hidden), "nothing to hide: is libcurl installed?"
    venv = tmp_path / "venv"
    election = tmp_path / "election.py"
    election.write_text(textwrap.dedent(f"""
        import time, s3lect
        kw = dict(lock="s3://{minio.bucket}/wheel/{os.getpid()}.json",
                  endpoint_url="{minio.endpoint}", region_name="us-east-1",
                  aws_access_key_id="{minio.access_key}",
                  aws_secret_access_key="{minio.secret_key}",
                  lease_timeout=3, renew_interval=0.5, renew_deadline=2,
                  frequent_interval=0.3, infrequent_interval=0.6)
        a = s3lect.Elector(server_id="wheel-a", **kw)
        b = s3lect.Elector(server_id="wheel-b", **kw)
        a.start(); b.start()
        end = time.monotonic() + 20
        while time.monotonic() < end and a.is_leader + b.is_leader != 1:
            time.sleep(0.1)
        leaders = [e.server_id for e in (a, b) if e.is_leader]
        a.close(); b.close()
        print("leaders", leaders, s3lect.__version__)
        assert len(leaders) == 1, leaders
        # Without libpq the other stores work and a postgres:// lock says
        # what to install (libpq is loaded at run time, not linked).
        p = None
        try:  # refused when the elector is made (the store is opened then)
            p = s3lect.Elector(server_id="wheel-pg", lock="postgres://127.0.0.1:1/db?key=k")
            p.start()
            p.wait_for_leadership(timeout=10)
            msg = "no error"
        except s3lect.ConfigError as e:
            msg = str(e)
        finally:
            if p is not None:
                p.close()
        print("postgres without libpq:", msg)
        assert "libpq" in msg and "install" in msg, msg
    """))
    script = textwrap.dedent(f"""
        set -eu
        mount --make-rprivate /
        mount -t tmpfs none /usr/include
        for f in {' '.join(hidden)}; do mknod "{upper}/$f" c 0 0; done
        mkdir -p "{upper}/pkgconfig"
        mount -t overlay overlay -o lowerdir={LIBDIR},upperdir={upper},workdir={work} {LIBDIR}
        mount -t tmpfs none {LIBDIR}/pkgconfig
        # Absent, as the test needs them absent:
        if ls {LIBDIR} | grep -E '^(libcurl|libcjson|libssl|libcrypto|libpq)'; then exit 90; fi
        if [ -e /usr/include/curl/curl.h ] || [ -e /usr/include/cjson/cJSON.h ]; then exit 91; fi
        if pkg-config --exists libcurl 2>/dev/null; then exit 92; fi
        "{sys.executable}" -m venv --without-pip "{venv}"
        "{sys.executable}" -m pip --python "{venv}/bin/python" install -q --no-index \\
            --no-deps "{WHEELS[0]}" 2>/dev/null ||
            "{sys.executable}" -m pip install -q --no-index --no-deps \\
                --target "{venv}/lib/site" "{WHEELS[0]}"
        PYTHONPATH="{venv}/lib/site" "{venv}/bin/python" -c \\
            'import s3lect, s3lect._core as c; print(c.__file__)'
        PYTHONPATH="{venv}/lib/site" "{venv}/bin/python" "{election}"
    """)
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "leaders ['wheel-" in r.stdout, r.stdout
    assert "postgres without libpq:" in r.stdout, r.stdout
    assert f"{venv}/" in r.stdout, f"s3lect was not loaded from the venv:\n{r.stdout}"
    print(r.stdout)
