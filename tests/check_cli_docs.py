#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The generated man page and shell completion (scripts/gen-docs.py) match
the built s3lect and work: regenerated from the binary they are identical to
the build's (so they cannot drift from --help), the man page lints clean
(mandoc -T lint -W warning, else groff -ww), it names every option of every
command, bash completion completes commands, options and option values
(also as `source <(s3lect completion bash)`), the zsh completion parses (zsh
-n), and the fish completion parses and completes option values (fish -n,
complete -C). The bash and fish files are what `s3lect completion` prints.

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
    fish = gen / "completion/s3lect.fish"
    for f in (exe, man, bash, zsh, fish):
        if not f.exists():
            fail(f"{f} is missing: build the s3lect_docs target")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(ROOT / "scripts/gen-docs.py"), str(exe), tmp],
                       check=True, timeout=120)
        for rel in ("man/s3lect.1", "completion/s3lect.bash", "completion/_s3lect",
                    "completion/s3lect.fish"):
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
    # The installed bash and fish files are what `s3lect completion` prints.
    for shell, f in (("bash", bash), ("fish", fish)):
        out = subprocess.run([str(exe), "completion", shell], capture_output=True, text=True,
                             timeout=30).stdout
        if out != f.read_text():
            fail(f"{f.name} is not what `s3lect completion {shell}` prints")
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
        [ "$(t s3lect run --lea)" = "--lease-timeout" ] || exit 18
        [ "$(t s3lect run --log-format '')" = "text json" ] || exit 19
        [ "$(t s3lect run --log-format j)" = "json" ] || exit 20
        [ "$(t s3lect completion f)" = "fish" ] || exit 21
        case " $(t s3lect check-store --ra) " in *" --racers "*) ;; *) exit 22 ;; esac
    """
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"bash completion check {r.returncode} failed: {r.stdout}{r.stderr}")
    # The same through `source <(s3lect completion bash)`, as the help says.
    r = subprocess.run(["bash", "-c", f'source <("{exe}" completion bash); '
                        'COMP_WORDS=(s3lect run --lea); COMP_CWORD=2; _s3lect; '
                        'echo "${COMPREPLY[*]}"'], capture_output=True, text=True, timeout=60)
    if r.stdout.strip() != "--lease-timeout":
        fail(f"source <(s3lect completion bash) does not complete run --lea: {r.stdout}{r.stderr}")
    if shutil.which("zsh"):
        for f, what in ((zsh, "the zsh completion"), (None, "s3lect completion zsh")):
            if f is None:
                f = Path(tempfile.mkdtemp()) / "_s3lect_src"
                f.write_text(subprocess.run([str(exe), "completion", "zsh"], capture_output=True,
                                            text=True, timeout=30).stdout)
            r = subprocess.run(["zsh", "-n", str(f)], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                fail(f"zsh -n of {what}: {r.stderr}")
    else:
        fail("zsh is missing to check the zsh completion (scripts/deps installs it)")
    if shutil.which("fish"):
        r = subprocess.run(["fish", "-n", str(fish)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"fish -n: {r.stderr}")
        r = subprocess.run(["fish", "-c", f"source {fish}; complete -C 's3lect run --log-format '"],
                           capture_output=True, text=True, timeout=60)
        if sorted(r.stdout.split()) != ["json", "text"]:
            fail(f"fish completes run --log-format with {r.stdout!r}, not text and json")
    else:
        print("check_cli_docs: fish is not installed: the fish completion is checked only as "
              "the CLI's output (scripts/deps installs fish)")
    print("check_cli_docs: man page and completion match --help, lint clean, complete")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
