# SPDX-License-Identifier: Apache-2.0
"""tests/data/config_table.txt and tests/data/env_table.txt, read for the
Python and CLI runners of the configuration tables (the C, Go and Lua
runners read the same files)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

TABLE = Path(__file__).resolve().parents[1] / "data" / "config_table.txt"
ENV_TABLE = TABLE.with_name("env_table.txt")


class Case(NamedTuple):
    id: str
    given: Dict[str, str]  #: option name -> text in the S3LECT_* syntax
    want: Dict[str, int]  #: option name -> effective value (ms or a count)
    error: Optional[str]  #: a text the error must contain


def _lines(path: Path):
    """Each case of a table: its id, its items as a dict (NAME -> TEXT) and
    its result: ("want", {NAME: VALUE text}) or ("error", text)."""
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        cid, given, result = line.split(" | ")
        items = dict(item.strip().split("=", 1) for item in given.split(";") if item.strip())
        if result.startswith("error "):
            yield cid, items, ("error", result[len("error "):])
        else:
            yield cid, items, ("want", dict(kv.split("=", 1) for kv in result[len("want "):].split()))


def cases() -> List[Case]:
    return [Case(cid, g, {}, r) if kind == "error" else
            Case(cid, g, {k: int(v) for k, v in r.items()}, None)
            for cid, g, (kind, r) in _lines(TABLE)]


class EnvCase(NamedTuple):
    id: str
    variables: Dict[str, str]  #: variable -> text ("" too: set but empty)
    want: Dict[str, str]  #: option name -> effective value as text ("" : a string not set)
    error: Optional[str]  #: a text the error must contain


def env_cases() -> List[EnvCase]:
    return [EnvCase(cid, v, {}, r) if kind == "error" else EnvCase(cid, v, r, None)
            for cid, v, (kind, r) in _lines(ENV_TABLE)]
