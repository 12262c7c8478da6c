#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One version number everywhere: the header's S3LECT_VERSION_* macros are
consistent, the Python package, the Lua rockspecs and the Go binding agree
with S3LECT_VERSION_STRING, the CHANGELOG has the version (or "Unreleased" on
top of it), and — given a build tree — `s3lect --version` prints it.

Usage: tests/check_version.py [BUILD_DIR]
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    errors: list[str] = []
    h = (ROOT / "libs3lect/include/s3lect.h").read_text()
    m = re.search(r'#define S3LECT_VERSION_STRING "(\d+)\.(\d+)\.(\d+)"', h)
    if not m:
        print("check_version: no S3LECT_VERSION_STRING in s3lect.h", file=sys.stderr)
        return 1
    version = ".".join(m.groups())
    for part, val in zip(("MAJOR", "MINOR", "PATCH"), m.groups()):
        mm = re.search(rf"#define S3LECT_VERSION_{part} (\d+)", h)
        if not mm or mm.group(1) != val:
            errors.append(f"s3lect.h: S3LECT_VERSION_{part} is not {val}")

    pyproject = (ROOT / "bindings/python/pyproject.toml").read_text()
    pv = re.search(r'^version\s*=\s*"([^"]+)"', pyproject, re.M)
    if pv and pv.group(1) != version:
        errors.append(f"bindings/python/pyproject.toml: version {pv.group(1)} != {version}")
    if not pv and "scikit_build_core.metadata.regex" not in pyproject:
        errors.append("bindings/python/pyproject.toml: neither a version nor the header regex")

    for rs in sorted((ROOT / "bindings/lua").glob("*.rockspec")):
        rv = re.search(r'^version\s*=\s*"([^"]+)"', rs.read_text(), re.M)
        if not rv:
            errors.append(f"{rs.relative_to(ROOT)}: no version")
        elif rv.group(1) != "scm-1" and rv.group(1).rsplit("-", 1)[0] != version:
            errors.append(f"{rs.relative_to(ROOT)}: version {rv.group(1)} is not {version}-N")
        name = f"s3lect-{rv.group(1)}.rockspec" if rv else ""
        if rv and rs.name != name:
            errors.append(f"{rs.relative_to(ROOT)}: the file name must be {name}")

    changelog = (ROOT / "CHANGELOG.md").read_text()
    heads = re.findall(r"^## (\S+)", changelog, re.M)
    if version not in heads:
        errors.append(f"CHANGELOG.md: no '## {version}' section (sections: {heads})")

    if argv:
        exe = Path(argv[0]) / "bin" / "s3lect"
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                             timeout=30)
        # The first line; the next name the libraries (and in a release, what is bundled).
        first = (out.stdout.splitlines() or [""])[0].strip()
        if out.returncode != 0 or first != f"s3lect {version}":
            errors.append(f"{exe} --version printed {first!r} first (rc "
                          f"{out.returncode}), not 's3lect {version}'")
    if errors:
        for e in errors:
            print(f"check_version: {e}", file=sys.stderr)
        return 1
    print(f"check_version: {version} in s3lect.h, pyproject, rockspecs, CHANGELOG"
          + (", s3lect --version" if argv else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
