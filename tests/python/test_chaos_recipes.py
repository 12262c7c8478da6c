# SPDX-License-Identifier: Apache-2.0
"""The store-native fence recipes under the chaos workload (issue 41 item 5,
its last part): the fence chaos run of tests/chaos/test_chaos_fence.py
(three `s3lect run` nodes on one lock, each through its own fault proxy,
and its faults and checker), on PostgreSQL, DynamoDB Local, etcd and Redis,
where the lock lives in a database the application also writes
(docs/fencing.md). Each node's command (tests/chaos/recipe_cmd.py) appends
"TERM SEQ NODE" lines by read-modify-write to one row, item or key of the
application's own data in that database, its write fenced by
s3lect.recipes with S3LECT_TERM and S3LECT_LEADER_ID, under one round, in
a random order (S3LECT_CHAOS_SEED replays it), of:

  kill_leader     kill -9 of the leader's s3lect (its tree dies with it)
  zombie          the leader frozen right after its read, past its lease,
                  until another term has appended; its command resumed first
                  (its write then begins after the successor's first write),
                  its supervisors once it is done (FenceChaos.zombie)
  sigterm_leader  SIGTERM to the leader (graceful: it releases the lock)
  STORE_restart   the database's server down and up again, same port and data

then chaos_checker.check_fence on every attempt and the data's final value:
every acknowledged append is in it, terms never go down in it, and no write
of a term that began after a newer term's first write was accepted; zero
violations, the zombie's write refused as fenced.

test_broken_recipe_is_caught: the zombie fault on Redis with the check left
out (the command's write a plain SET): the checker must find the lost
append and the zombie's accepted write.

Here rather than in the chaos suite: the recipes need the binding
(s3lect.recipes imports the compiled core through s3lect's package), which
tests/python's venv has and the chaos suite's python3 does not. Everything
binds to 127.0.0.1; every server and process started is stopped.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from s3lect import recipes

TESTS = Path(__file__).resolve().parent.parent
for _p in (TESTS, TESTS / "chaos"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from chaos_lib import FAKETIME_LIB  # noqa: E402
from test_chaos_fence import FenceChaos, report, run_broken, run_round  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

RECIPE_CMD = TESTS / "chaos" / "recipe_cmd.py"
STORES = ["postgres", "dynamodb", "etcd", "redis"]


class RecipeChaos(FenceChaos):
    """FenceChaos whose nodes' command is recipe_cmd.py on the application's
    data in the lock's own database, and whose faults are those above."""

    def __init__(self, store: str, tmp: Path, bin_: Path, rng: random.Random, stack: ExitStack,
                 mode: str = "fenced"):
        super().__init__(store, tmp, bin_, rng, stack, mode)
        b, srv = self.backend, self.backend.server
        tag = secrets.token_hex(4)
        spec: dict[str, object] = {"store": store, "port": b.port, "lock": b._key(self.key)}
        if store == "postgres":
            self.app = f"app_{tag}"
            srv.psql(f"CREATE TABLE {self.app} (k text PRIMARY KEY, v text NOT NULL)")
            spec["table"] = recipes.POSTGRES_DEFAULT_TABLE  # (no &table= in the lock URL)
        elif store == "dynamodb":
            self.app = f"app-{tag}"
            srv.create_table(self.app, pk="id")
            spec.update(table=b.table, access_key=srv.access_key, secret_key=srv.secret_key,
                        region=srv.region)
        elif store == "etcd":
            self.app = f"app/{tag}/data"
        elif store == "redis":
            from harness.redis_server import KEY_PREFIX
            self.app = f"app:{tag}"
            spec.update(lock=KEY_PREFIX + b._key(self.key), password=srv.admin_password)
        else:
            raise AssertionError(f"no recipe for {store}")
        spec["app"] = self.app
        path = tmp / "recipe-spec.json"
        path.touch(mode=0o600)
        path.write_text(json.dumps(spec))
        # Under S3LECT_PY_ASAN=1 the binding needs the sanitizer runtimes
        # preloaded (scripts/test-python), which the nodes' environment drops.
        pre = os.environ.get("LD_PRELOAD", "")
        for n in self.nodes:
            n.cmd = [*(["env", f"LD_PRELOAD={pre}"] if pre else []), sys.executable,
                     str(RECIPE_CMD), str(self.cmd_log), str(tmp / f"events-{n.id}.log"),
                     str(tmp), str(path)]

    def kinds(self) -> list[str]:
        return ["kill_leader", "zombie", "sigterm_leader", self.backend.restart_kind]

    def final(self) -> bytes | None:
        """The application's data as the database holds it (directly)."""
        srv = self.backend.server
        if self.store == "postgres":
            out = srv.psql(f"SELECT v FROM {self.app} WHERE k = 'data'")
            return out.rstrip("\n").encode() + b"\n" if out.strip() else None
        if self.store == "dynamodb":
            item = srv.client().get_item(TableName=self.app, Key={"id": {"S": "data"}},
                                         ConsistentRead=True).get("Item")
            return item["v"]["S"].encode() if item else None
        if self.store == "etcd":
            return srv.get_key(self.app)[0]
        return srv.call("GET", self.app)


_SUMMARY: list[str] = []


class _SummaryPlugin:
    def pytest_terminal_summary(self, terminalreporter):
        if _SUMMARY:
            terminalreporter.section("chaos: fence recipes")
            for line in _SUMMARY:
                terminalreporter.write_line(line)


@pytest.fixture
def summary(request: pytest.FixtureRequest) -> list[str]:
    """Lines printed in pytest's terminal summary (as the chaos suite's)."""
    pm = request.config.pluginmanager
    if not pm.has_plugin("s3lect-recipe-chaos"):
        pm.register(_SummaryPlugin(), "s3lect-recipe-chaos")
    return _SUMMARY


def need_faketime() -> None:
    if not FAKETIME_LIB.exists():
        pytest.fail(f"libfaketime not found at {FAKETIME_LIB}: apt-get install faketime "
                    "(scripts/deps installs it)")


@pytest.mark.parametrize("store", STORES)
def test_chaos_recipe(store: str, tmp_path: Path, s3lect_bin: Path, summary: list[str]):
    """One round of every fault kind, in a random order, then the fence
    checker: no violation, and the zombie's write refused as fenced."""
    need_faketime()
    seed = int(os.environ.get("S3LECT_CHAOS_SEED") or secrets.randbits(32))
    rng = random.Random(seed)
    t0 = time.monotonic()
    c, rep = run_round(lambda stack: RecipeChaos(store, tmp_path, s3lect_bin, rng, stack), rng)
    line = report(f"recipe {store}", c, rep, time.monotonic() - t0)
    summary.append(line)
    print(line)
    (tmp_path / "summary.txt").write_text("\n".join([line, *c.problems, *rep.violations]) + "\n")
    errors = c.problems + rep.violations
    assert not errors, (f"recipe chaos run on {store} failed (seed {seed}, logs in {tmp_path}):\n"
                        + "\n".join(errors))
    # kill -9, the zombie and SIGTERM each hand leadership on.
    assert rep.acked >= 10 and rep.terms >= 4, \
        f"too little happened: {rep.acked} appends by {rep.terms} terms"
    assert c.zombies == 1 and rep.zombie_refused >= 1, \
        f"the zombie fault produced no refused write ({c.zombies}, {rep.zombie_refused})"


def test_broken_recipe_is_caught(tmp_path: Path, s3lect_bin: Path, summary: list[str]):
    """The zombie fault on Redis with the recipe's check left out (the write
    a plain SET): the checker must report the successor's lost append and
    the zombie's accepted write."""
    need_faketime()
    rng = random.Random(1)
    _, kinds, rep = run_broken(
        lambda stack: RecipeChaos("redis", tmp_path, s3lect_bin, rng, stack, mode="plain"),
        tmp_path)
    summary.append(f"[recipe off, redis] the checker found: {', '.join(kinds) or 'nothing'} "
                   f"({len(rep.violations)} violations)")
    assert {"lost", "zombie"} <= set(kinds), (
        f"the checker missed the broken recipe (logs in {tmp_path}): {rep.violations}")
