#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that libs3lect's layers only depend downwards.

libs3lect/src has one folder per layer, lowest first (the order of
S3LECT_LAYERS in libs3lect/CMakeLists.txt):

    base < config < aws < store < engine < peer < runtime < api

A file may include headers of its own layer and lower ones (and the public
s3lect.h), and may call functions defined in its own layer or lower ones.
Calls are found by name: every non-static function defined in a layer's .c
files belongs to that layer; a call to it from a lower layer is an error.

  tests/check_layers.py [REPO_ROOT]
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
SRC = ROOT / "libs3lect" / "src"


def layers():
    cm = (ROOT / "libs3lect" / "CMakeLists.txt").read_text()
    m = re.search(r"set\(S3LECT_LAYERS ([^)]*)\)", cm)
    if not m:
        raise SystemExit("check_layers: S3LECT_LAYERS not found in libs3lect/CMakeLists.txt")
    return m.group(1).split()


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def main():
    order = layers()
    rank = {name: i for i, name in enumerate(order)}
    files = {}
    for d in SRC.iterdir():
        if not d.is_dir():
            continue
        if d.name not in rank:
            print(f"check_layers: folder libs3lect/src/{d.name} is not a layer in S3LECT_LAYERS")
            return 1
        for f in d.iterdir():
            if f.suffix in (".c", ".h"):
                files[f] = d.name
    loose = [f.name for f in SRC.iterdir() if f.is_file()]
    errors = []
    if loose:
        errors.append(f"files outside a layer folder: {', '.join(sorted(loose))}")
    header_layer = {f.name: layer for f, layer in files.items() if f.suffix == ".h"}
    defined = {}
    for f, layer in files.items():
        if f.suffix != ".c":
            continue
        for m in re.finditer(r"^(?!static\b)[A-Za-z][\w \*]*?\b([a-z_][a-z0-9_]*)\(([^;{]*)\)\s*\{",
                             strip(f.read_text()), flags=re.M):
            defined.setdefault(m.group(1), layer)
    for f, layer in sorted(files.items()):
        text = f.read_text()
        for m in re.finditer(r'#include\s+"([^"]+)"', text):
            h = Path(m.group(1)).name
            hl = header_layer.get(h)
            if hl is not None and rank[hl] > rank[layer]:
                errors.append(f"{f.relative_to(ROOT)} ({layer}) includes {h} ({hl})")
        body = strip(text)
        for m in re.finditer(r"\b([a-z_][a-z0-9_]*)\s*\(", body):
            name = m.group(1)
            dl = defined.get(name)
            if dl is not None and rank[dl] > rank[layer]:
                errors.append(f"{f.relative_to(ROOT)} ({layer}) calls {name} ({dl})")
    # Every thread of the library and the CLI is made by u_thread_create
    # (base/proc.c), which blocks asynchronous signals in it (docs/threading.md).
    for f in sorted(list(files) + list((ROOT / "libs3lect" / "cli").glob("*.c"))):
        if f.name != "proc.c" and re.search(r"\bpthread_create\s*\(", strip(f.read_text())):
            errors.append(f"{f.relative_to(ROOT)} calls pthread_create: use u_thread_create "
                          "(base/proc.h), which blocks asynchronous signals in the new thread")
    for e in sorted(set(errors)):
        print("check_layers: " + e)
    if errors:
        print(f"check_layers: {len(set(errors))} dependencies run against the layers "
              f"({' < '.join(order)})")
        return 1
    print(f"check_layers: {len(files)} files in {len(order)} layers, every dependency points down "
          f"({' < '.join(order)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
