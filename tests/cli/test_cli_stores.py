# SPDX-License-Identifier: Apache-2.0
"""One registry of stores (issue 40 item 1): the scheme table in C
(libs3lect/src/store/schemes.c, shown by `s3lect stores`) and the test side's
(tests/harness/stores.py) hold every store, and every place a user reads
about stores is made from them.

The ground truth is the store files: libs3lect/src/store/store_NAME.c (but
the custom store, which has no URL). A store added there and missing from
the scheme table, the test registry, --help, `help run`, the man page,
`s3lect stores`, docs/stores.md or docs/cli.md fails here.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build"))
BIN = BUILD / "bin" / "s3lect"
sys.path.insert(0, str(ROOT / "tests"))
from harness.stores import STORES, by_scheme, kinds  # noqa: E402


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=30)


def store_files() -> set[str]:
    return {p.stem[len("store_"):] for p in (ROOT / "libs3lect/src/store").glob("store_*.c")} \
        - {"custom"}


def listed() -> list[dict]:
    r = cli("stores", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def test_every_store_file_has_a_row_in_both_registries():
    files = store_files()
    reg = {s.kind for s in STORES}
    assert files == reg, (f"store files {sorted(files)} vs tests/harness/stores.py "
                          f"{sorted(reg)}: add the store's row (or remove the stale one)")
    schemes = {s["scheme"] for s in listed()}
    for s in STORES:
        assert s.scheme in schemes, f"{s.kind}: scheme {s.scheme}:// is not in s3lect stores"
    for scheme in schemes:
        assert by_scheme(scheme), f"s3lect stores lists {scheme}://, tests/harness/stores.py not"


def test_every_compiled_store_is_in_the_help_the_man_page_and_the_docs():
    top = cli("--help").stdout
    run_help = cli("help", "run").stdout
    text = cli("stores").stdout
    man_path = BUILD / "share" / "man" / "s3lect.1"
    man = man_path.read_text().replace("\\-", "-") if man_path.exists() else None
    stores_md = (ROOT / "docs" / "stores.md").read_text()
    anchors = {slug(h) for h in re.findall(r"^#+ (.*)$", stores_md, re.M)}
    cli_md = (ROOT / "docs" / "cli.md").read_text()
    schemes_item = re.search(r"^- Schemes: (.*?)(?=^- )", cli_md, re.M | re.S)
    assert schemes_item, "docs/cli.md has no '- Schemes:' item"
    n = 0
    for s in listed():
        scheme, noun = s["scheme"], s["store"]
        assert s["docs"].split("#")[1] in anchors, f"{scheme}: {s['docs']} is no heading"
        assert f"{scheme}://" in schemes_item.group(1), f"docs/cli.md's Schemes lack {scheme}://"
        assert f"{scheme}://" in text and noun in text, f"s3lect stores lacks {scheme}"
        if not s["compiled"]:
            assert "[not in this build]" in text
            continue
        n += 1
        first = " ".join(top.split("\n\n")[1].split())
        assert noun in first, f"--help's first paragraph lacks {noun!r}"
        assert noun in " ".join(run_help.split("\n\n")[1].split()), f"help run lacks {noun!r}"
        assert s["usage"].split()[0] in top.split("lock URLs (docs/stores.md)")[1], f"--help lacks {s['usage']}"
        if man is not None:
            name = " ".join(man.split(".SH NAME\n", 1)[1].split("\n.SH", 1)[0].split())
            assert noun in name, f"the man page's NAME lacks {noun!r}"
            assert s["usage"].split()[0] in man, f"the man page lacks {s['usage']}"
    assert n >= 8, f"only {n} stores compiled in: {listed()}"


def test_the_suites_and_the_bench_take_their_lists_from_the_registry():
    """The chaos run's backends are the registry's; the lists of the other
    suites and the bench are read from it (a second list would fail here)."""
    from harness.backends import BACKENDS
    assert set(BACKENDS) == {s.chaos for s in STORES if "chaos" in s.suites}
    for path, needle in (("tests/python/test_stores.py", 'STORES = kinds("python")'),
                         ("bench/lib/cost_stores.py", 'STORES = tuple(kinds("cost"))'),
                         ("bench/run", 'STORES = tuple(kinds("cost"))'),
                         ("tests/stores/conftest.py", 'params=kinds("stores")'),
                         ("tests/chaos/test_chaos.py", "from harness.backends import BACKENDS")):
        assert needle in (ROOT / path).read_text(), f"{path} no longer reads the registry"
    assert kinds("cas") and set(kinds("cas")) <= set(kinds("stores"))


def test_stores_command_for_people_and_scripts():
    r = cli("stores")
    assert r.returncode == 0 and r.stdout.startswith("s3://"), r
    assert "lock URL: s3://BUCKET/KEY" in r.stdout
    assert "postgres://, postgresql://" in r.stdout and "az://, https://" in r.stdout
    got = {s["scheme"]: s for s in listed()}
    assert got["s3"]["credentials"] == "aws" and got["gs"]["credentials"] == "gcp"
    assert got["az"]["aliases"] == ["https"] and got["redis"]["aliases"] == ["rediss"]
    assert got["postgres"]["needs"].startswith("libpq.so.5")
    r = cli("stores", "--jsno")
    assert r.returncode == 2 and "did you mean --json?" in r.stderr, r.stderr
    r = cli("stores", "s3://b/k")
    assert r.returncode == 2 and "takes no argument" in r.stderr, r.stderr
    assert cli("help", "stores").stdout.startswith("usage: s3lect stores")
    r = cli("stors")
    assert r.returncode == 2 and "did you mean stores?" in r.stderr, r.stderr
