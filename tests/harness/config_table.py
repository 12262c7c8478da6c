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


def cases() -> List[Case]:
    out = []
    for line in TABLE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        cid, given, result = line.split(" | ")
        g = dict(item.strip().split("=", 1) for item in given.split(";") if item.strip())
        if result.startswith("error "):
            out.append(Case(cid, g, {}, result[len("error "):]))
        else:
            want = dict(kv.split("=") for kv in result[len("want "):].split())
            out.append(Case(cid, g, {k: int(v) for k, v in want.items()}, None))
    return out


class EnvCase(NamedTuple):
    id: str
    variables: Dict[str, str]  #: variable -> text ("" too: set but empty)
    want: Dict[str, str]  #: option name -> effective value as text ("" : a string not set)
    error: Optional[str]  #: a text the error must contain


def env_cases() -> List[EnvCase]:
    out = []
    for line in ENV_TABLE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        cid, given, result = line.split(" | ")
        v = dict(item.strip().split("=", 1) for item in given.split(";") if item.strip())
        if result.startswith("error "):
            out.append(EnvCase(cid, v, {}, result[len("error "):]))
        else:
            want = dict(kv.split("=", 1) for kv in result[len("want "):].split())
            out.append(EnvCase(cid, v, want, None))
    return out
