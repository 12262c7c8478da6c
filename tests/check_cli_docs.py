#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The generated man page and shell completion (scripts/gen-docs.py) match
the built s3lect and work: regenerated from the binary they are identical to
the build's (so they cannot drift from --help), the man page lints clean
(mandoc -T lint -W warning, else groff -ww), it names every option of every
command, bash completion completes commands, options and option values, and
the zsh completion parses (zsh -n).

Usage: tests/check_cli_docs.py BUILD_DIR
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fail(msg: str) -> None:
    print(f"check_cli_docs: {msg}", file=sys.stderr)
    sys.exit(1)


def main(build: Path) -> int:
    exe, gen = build / "bin" / "s3lect", build / "share"
    man, bash, zsh = gen / "man/s3lect.1", gen / "completion/s3lect.bash", gen / "completion/_s3lect"
    for f in (exe, man, bash, zsh):
        if not f.exists():
            fail(f"{f} is missing: build the s3lect_docs target")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(ROOT / "scripts/gen-docs.py"), str(exe), tmp],
                       check=True, timeout=120)
        for rel in ("man/s3lect.1", "completion/s3lect.bash", "completion/_s3lect"):
            a, b = (gen / rel).read_text(), (Path(tmp) / rel).read_text()
            if a != b:
                fail(f"{rel} differs from what --help gives now: rebuild (it drifted)")
    text = man.read_text()
    if shutil.which("mandoc"):
        r = subprocess.run(["mandoc", "-T", "lint", "-W", "warning", str(man)],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
            fail(f"mandoc -T lint: {r.stdout}{r.stderr}")
    elif shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(man)],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or r.stderr.strip():
            fail(f"groff -ww: {r.stderr}")
    else:
        fail("neither mandoc nor groff to lint the man page (scripts/deps installs mandoc)")
    for cmd in ("run", "status", "watch", "check-store", "init-store", "whoami"):
        helptext = subprocess.run([str(exe), cmd, "--help"], capture_output=True, text=True,
                                  timeout=30).stdout
        for opt in set(re.findall(r"--[a-z][a-z0-9-]+", helptext)):
            if opt.replace("-", "\\-") not in text:
                fail(f"the man page does not mention {opt} of {cmd}")
    script = f"""
        source "{bash}"
        t() {{ COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=(); _s3lect
               echo "${{COMPREPLY[*]}}"; }}
        [ "$(t s3lect ru)" = run ] || exit 11
        [ "$(t s3lect run --lease-t)" = --lease-timeout ] || exit 12
        case " $(t s3lect status --) " in *" --json "*) ;; *) exit 13 ;; esac
        case " $(t s3lect run --peer-ca {ROOT}/READ) " in *README.md*) ;; *) exit 14 ;; esac
        [ -z "$(t s3lect run --lease-timeout '')" ] || exit 15
        case " $(t s3lect run --lock x -- bas) " in *" bash "*) ;; *) exit 16 ;; esac
        complete -p s3lect | grep -q _s3lect || exit 17
    """
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"bash completion check {r.returncode} failed: {r.stdout}{r.stderr}")
    if shutil.which("zsh"):
        r = subprocess.run(["zsh", "-n", str(zsh)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"zsh -n: {r.stderr}")
    else:
        fail("zsh is missing to check the zsh completion (scripts/deps installs it)")
    print("check_cli_docs: man page and completion match --help, lint clean, complete")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
