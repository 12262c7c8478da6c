#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The GitHub Actions workflows (.github/workflows/*.yml) lint clean
(ctest workflow_lint, label lint).

actionlint (expressions, job graph and outputs, runner labels, action inputs,
and every `run:` script through shellcheck when it is installed, as
scripts/deps does) is built once from the Go module proxy into
${S3LECT_CACHE:-~/.cache/s3lect}/actionlint-<version>/; first it must find the
errors in a broken workflow, so a linter that checks nothing fails here too.
Then this project's rules, which actionlint has not:
- a secret reaches a step only through `env:`, never expanded inside `run:`
  (the shell would see it in its command line, and a quote in it would run);
- the workflow's default permissions are read-only (jobs ask for more);
- every actions/checkout has persist-credentials: false (no token left in
  .git/config for later steps).

Exit 77 (ctest: skipped) with the reason when Go is not installed.
Usage: tests/check_workflows.py [ROOT]
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint"
VERSION = "v1.7.12"
SKIP = 77

BROKEN = """\
name: broken
on: push
jobs:
  a:
    runs-on: ubuntu-24.04
    steps:
      - run: echo ${{ needs.nothing.outputs.x }}
  b:
    needs: [a, missing]
    runs-on: ubuntu-24.04
    steps:
      - run: echo "$UNSET" $1
"""


def actionlint() -> Path:
    cache = Path(os.environ.get("S3LECT_CACHE") or Path.home() / ".cache/s3lect")
    dest = cache / f"actionlint-{VERSION}" / "actionlint"
    if dest.is_file() and os.access(dest, os.X_OK):
        return dest
    go = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")
                                     if os.access(p, os.X_OK)), None)
    if not go:
        print(f"SKIP: Go is not installed, so actionlint ({ACTIONLINT}@{VERSION}) cannot be "
              "built: the workflows are not linted")
        sys.exit(SKIP)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Built into a directory of its own, then renamed: two builds at once
    # (two ctest runs) never see half a binary.
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        env = dict(os.environ, GOBIN=tmp, GOFLAGS="-mod=mod", GO111MODULE="on")
        r = subprocess.run([go, "install", f"{ACTIONLINT}@{VERSION}"], env=env, cwd=tmp,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"FAIL: go install {ACTIONLINT}@{VERSION}:\n{r.stdout}{r.stderr}")
        os.replace(Path(tmp) / "actionlint", dest)
    print(f"built {dest}")
    return dest


def lint(tool: Path, files: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool), "-no-color", *map(str, files)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def own_rules(path: Path, text: str) -> list[str]:
    import yaml  # PyYAML (scripts/deps); only here, so a skip needs none

    errors = []
    wf = yaml.safe_load(text)
    perms = wf.get("permissions")
    if not (perms == {} or perms == "read-all" or
            (isinstance(perms, dict) and set(perms.values()) <= {"read", "none"})):
        errors.append(f"{path}: the top-level permissions are not read-only: {perms!r}")
    for name, job in (wf.get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps") or []):
            where = f"{path}: job {name}, step {step.get('name') or step.get('uses') or i + 1}"
            run = step.get("run")
            if isinstance(run, str) and re.search(r"\$\{\{[^}]*\bsecrets\.", run):
                errors.append(f"{where}: a secret expanded inside run: (pass it through env:)")
            uses = step.get("uses") or ""
            if uses.startswith("actions/checkout@") and \
                    (step.get("with") or {}).get("persist-credentials") is not False:
                errors.append(f"{where}: actions/checkout without persist-credentials: false")
    return errors


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    files = sorted((root / ".github/workflows").glob("*.y*ml"))
    if not files:
        print(f"FAIL: no workflow in {root}/.github/workflows")
        return 1
    tool = actionlint()
    shellcheck = shutil.which("shellcheck")
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / ".github/workflows/broken.yml"
        bad.parent.mkdir(parents=True)
        bad.write_text(BROKEN)
        r = lint(tool, [bad], Path(tmp))
        want = ["needs.nothing", "missing"] + (["SC2086"] if shellcheck else [])
        if r.returncode != 1 or not all(w in r.stdout for w in want):
            print(f"FAIL: actionlint did not find {want} in a broken workflow "
                  f"(exit {r.returncode}):\n{r.stdout}{r.stderr}")
            return 1
    r = lint(tool, [f.relative_to(root) for f in files], root)
    errors = [r.stdout + r.stderr] if r.returncode != 0 else []
    for f in files:
        errors += own_rules(f.relative_to(root), f.read_text())
    names = ", ".join(str(f.relative_to(root)) for f in files)
    if errors:
        print("\n".join(errors))
        print(f"FAIL: {names}")
        return 1
    print(f"PASS: {names} (actionlint {VERSION}"
          f"{', run: scripts through shellcheck' if shellcheck else ', no shellcheck installed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
