#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every source file of the project carries an SPDX licence identifier.

Usage: tests/check_spdx.py [--fix] [ROOT]

Source files: C, headers, Python, Go, Lua, shell and CMake files, and
executable scripts with a shebang, found with `git ls-files` (or by walking the
tree outside a git checkout). Third-party data (tests/data), fuzz corpora,
benchmark results and generated files are not source. The identifier must be
within the first three lines. --fix inserts it (after a shebang or a Go build
constraint) where it is missing.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ID = "SPDX-License-Identifier: Apache-2.0"
SKIP_DIRS = ("tests/data/", "tests/fuzz/corpus/", "bench/results/", "build", ".git/",
             "bindings/python/build/", "docs/")
COMMENT = {".c": "/* {} */", ".h": "/* {} */", ".i": "/* {} */", ".go": "// {}",
           ".lua": "-- {}", ".py": "# {}", ".sh": "# {}", ".cmake": "# {}",
           ".rockspec": "-- {}", ".toml": "# {}", ".map": "/* {} */"}
NAMES = {"CMakeLists.txt": "# {}", "go.mod": "// {}"}


def files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                             text=True, check=True, timeout=60).stdout.split("\n")
        rel = [p for p in out if p]
    except (OSError, subprocess.CalledProcessError):
        rel = [str(Path(d, f).relative_to(root)) for d, _, fs in os.walk(root) for f in fs]
    return [root / p for p in rel
            if not any(p.startswith(s) or f"/{s}" in f"/{p}" for s in SKIP_DIRS)]


def style(path: Path) -> str | None:
    if path.name in NAMES:
        return NAMES[path.name]
    if path.suffix in COMMENT:
        return COMMENT[path.suffix]
    if path.suffix == "" and path.is_file():
        try:
            with open(path, "rb") as f:
                first = f.readline()
        except OSError:
            return None
        if first.startswith(b"#!"):
            return "-- {}" if b"lua" in first else "# {}"
    return None


def fix(path: Path, fmt: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    at = 0
    while at < len(lines) and (lines[at].startswith("#!") or lines[at].startswith("//go:build")
                               or lines[at].startswith("# -*-")):
        at += 1
    if at and lines[at - 1].startswith("//go:build"):
        lines.insert(at, "\n")
        at += 1
    # Go: a blank line after it, so that it never joins a package doc comment.
    lines.insert(at, fmt.format(ID) + ("\n\n" if fmt.startswith("//") else "\n"))
    path.write_text("".join(lines))


def main(argv: list[str]) -> int:
    do_fix = "--fix" in argv
    args = [a for a in argv if a != "--fix"]
    root = Path(args[0] if args else Path(__file__).resolve().parent.parent).resolve()
    missing = []
    checked = 0
    for p in files(root):
        fmt = style(p)
        if not fmt or not p.is_file():
            continue
        checked += 1
        try:
            head = "".join(p.read_text(errors="replace").splitlines(keepends=True)[:3])
        except OSError as e:
            missing.append(f"{p.relative_to(root)}: unreadable ({e})")
            continue
        if ID not in head:
            only = os.environ.get("SPDX_FIX_ONLY", "").split()
            rel = str(p.relative_to(root))
            if do_fix and (not only or any(rel.startswith(o) for o in only)):
                fix(p, fmt)
            elif not do_fix:
                missing.append(str(p.relative_to(root)))
    if missing:
        print(f"check_spdx: {len(missing)} of {checked} source files lack '{ID}' in their "
              f"first three lines (tests/check_spdx.py --fix adds it):", file=sys.stderr)
        for m in missing[:50]:
            print(f"  {m}", file=sys.stderr)
        return 1
    print(f"check_spdx: {checked} source files, every one has '{ID}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
