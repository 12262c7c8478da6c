#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generates the s3lect man page and the zsh completion (zsh's #compdef format,
for an fpath directory) from the binary's own --help texts, and the bash and
fish completion with `s3lect completion SHELL` (from the CLI's option
table), so that they cannot drift from it.

Usage: scripts/gen-docs.py S3LECT_BINARY OUT_DIR
Writes OUT_DIR/man/s3lect.1, OUT_DIR/completion/s3lect.bash,
OUT_DIR/completion/_s3lect and OUT_DIR/completion/s3lect.fish. The build
(CMake target s3lect_docs) runs it after building the CLI; `cmake --install`
installs the four files.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

FILE_ARGS = ("FILE", "DIR")


def help_text(binary: str, *args: str) -> str:
    r = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or not r.stdout.strip():
        raise SystemExit(f"gen-docs: '{binary} {' '.join(args)} --help' failed: {r.stderr}")
    return r.stdout


def commands(top: str) -> list[tuple[str, str]]:
    """(name, summary) of each command in the top-level help's command list."""
    out, in_list, last = [], False, None
    for line in top.splitlines():
        if line.startswith("commands:"):
            in_list = True
            continue
        if in_list:
            if not line.strip():
                break
            m = re.match(r"^  ([a-z][a-z-]*)\b(.*)$", line)
            if m:
                summary = re.split(r"\s{2,}", m.group(2).strip())[-1] if m.group(2) else ""
                out.append([m.group(1), summary])
                last = out[-1]
            elif last is not None and line.startswith("    "):
                last[1] = line.strip()
    return [(n, s) for n, s in out if n != "help"]


def options(text: str) -> list[tuple[str, str | None]]:
    """(--option, its argument name or None) for every option the help lists."""
    seen: dict[str, str | None] = {}
    for m in re.finditer(r"^\s+(-\w, )?(--[a-z][a-z0-9-]*)(?:[ =]([A-Z][A-Z:|_0-9.]*))?", text,
                         re.M):
        seen.setdefault(m.group(2), m.group(3))
    usage = text.splitlines()[0] if text else ""
    for m in re.finditer(r"\[(--[a-z][a-z0-9-]*)(?: ([A-Z][A-Z_0-9]*))?\]", usage):
        seen.setdefault(m.group(1), m.group(2))
    return sorted(seen.items())


def top_summary(top: str) -> str:
    """The top-level help's first paragraph (which names every store, from
    the CLI's scheme table), as one line for NAME: "leader election on ...,
    without a coordinator"."""
    paras = [p for p in top.split("\n\n") if p.strip()]
    text = " ".join(paras[1].split()) if len(paras) > 1 else ""
    if not text.startswith("Leader election"):
        raise SystemExit(f"gen-docs: no summary paragraph in --help: {text[:80]!r}")
    return text[0].lower() + text[1:].rstrip(".")


def roff_escape(line: str) -> str:
    line = line.replace("\\", "\\e")
    if line.startswith((".", "'")):
        line = "\\&" + line
    line = line.replace("-", "\\-")
    # groff reads ASCII: anything else as a \[uXXXX] escape.
    return "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in line)


def man_page(binary: str, version: str, top: str, cmds: list[tuple[str, str]]) -> str:
    # SOURCE_DATE_EPOCH (reproducible builds), else today.
    stamp = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date = time.strftime("%Y-%m-%d", time.gmtime(stamp))
    out = [f'.TH S3LECT 1 "{date}" "s3lect {version}" "User Commands"',
           ".SH NAME",
           "s3lect \\- " + roff_escape(top_summary(top)),
           ".SH SYNOPSIS"]
    for i, (name, _) in enumerate(cmds):
        usage = help_text(binary, name).splitlines()[0].removeprefix("usage: ")
        out += ([] if i == 0 else [".PP"]) + [roff_escape(usage)]
    out += [".SH DESCRIPTION",
            "This page is generated from the program's own \\fB\\-\\-help\\fR texts",
            "(\\fBs3lect help\\fR \\fIcommand\\fR shows the same).",
            ".PP", ".nf"]
    out += [roff_escape(ln) for ln in top.rstrip().splitlines()]
    out += [".fi", ".SH COMMANDS"]
    for name, summary in cmds:
        out += [f".SS {name}", roff_escape(summary), ".PP", ".nf"]
        out += [roff_escape(ln) for ln in help_text(binary, name).rstrip().splitlines()]
        out += [".fi"]
    out += [".SH ENVIRONMENT",
            "Every option of \\fBrun\\fR, \\fBstatus\\fR and \\fBwatch\\fR can be set as",
            "\\fBS3LECT_\\fR\\fINAME\\fR (the option's name in upper case, \\- as _);",
            "the command line wins.",
            "AWS credentials come from the AWS SDKs' chain (AWS_* variables,",
            "profiles, web identity, container and instance metadata).",
            ".SH SEE ALSO",
            "The repository's README.md and docs/ (cli.md, peer.md, s3.md, metrics.md)."]
    return "\n".join(out) + "\n"


def completion(binary: str, shell: str) -> str:
    """`s3lect completion SHELL`: the CLI writes its completion from its own
    option table (issue 39 item 5)."""
    r = subprocess.run([binary, "completion", shell], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0 or not r.stdout.strip():
        raise SystemExit(f"gen-docs: '{binary} completion {shell}' failed: {r.stderr}")
    return r.stdout


def zsh_completion(cmds: list[tuple[str, str]], opts: dict[str, list]) -> str:
    def q(s: str) -> str:
        return s.replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")
    descr = "\n".join(f"        '{n}:{q(s)}'" for n, s in cmds)
    cases = []
    for name, _ in cmds:
        specs = []
        for o, a in opts[name]:
            if a is None:
                specs.append(f"'{o}[{o}]'")
            elif a in FILE_ARGS:
                specs.append(f"'{o}=[{o}]:{a.lower()}:_files'")
            else:
                specs.append(f"'{o}=[{o}]:{a.lower()}:'")
        if name == "run":
            specs.append("'*::command:_normal'")
        else:
            specs.append("'*:lock URL:_files'")
        cases.append(f"        {name}) _arguments -s {' '.join(specs)} ;;")
    return f"""#compdef s3lect
# SPDX-License-Identifier: Apache-2.0
# zsh completion for s3lect, generated from its --help texts (scripts/gen-docs.py).
_s3lect() {{
    local -a commands
    commands=(
{descr}
        'help:show help for a command'
    )
    if (( CURRENT == 2 )); then
        _describe -t commands 's3lect command' commands
        return
    fi
    local cmd=${{words[2]}}
    shift words
    (( CURRENT-- ))
    case $cmd in
{chr(10).join(cases)}
        help) _describe -t commands 's3lect command' commands ;;
    esac
}}
_s3lect "$@"
"""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary, out = argv[0], Path(argv[1])
    top = help_text(binary)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=30).stdout.split("\n")[0].split()[-1]
    cmds = commands(top)
    if not cmds or "run" not in dict(cmds):
        raise SystemExit(f"gen-docs: no commands found in '{binary} --help'")
    (out / "man").mkdir(parents=True, exist_ok=True)
    (out / "completion").mkdir(parents=True, exist_ok=True)
    (out / "man" / "s3lect.1").write_text(man_page(binary, version, top, cmds))
    (out / "completion" / "s3lect.bash").write_text(completion(binary, "bash"))
    # zsh's own format for its fpath (#compdef), from the help texts;
    # `s3lect completion zsh` is the bash one under bashcompinit, to source.
    opts = {name: options(help_text(binary, name)) for name, _ in cmds}
    (out / "completion" / "_s3lect").write_text(zsh_completion(cmds, opts))
    (out / "completion" / "s3lect.fish").write_text(completion(binary, "fish"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
