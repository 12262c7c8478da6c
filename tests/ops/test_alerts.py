# SPDX-License-Identifier: Apache-2.0
"""The alerting rules (examples/prometheus/s3lect-rules.yml) and the Grafana
dashboard (examples/grafana/s3lect-dashboard.json) of issue 42 item 4.

- `promtool check rules` accepts the rules; `promtool test rules` passes the
  synthetic cases of tests/ops/s3lect-rules.test.yml, which has a firing case
  and a near miss for every alert.
- Series recorded from a real three-node run on the file store (a steady
  leader, a SIGTERM handover, a kill -9 of the leader, steady again), scraped
  every 0.5 s and time-compressed (one scrape = one 30 s step) into promtool
  input series: the alerts promtool reports at every step are those computed
  from the recorded scrapes themselves.
- Every metric and label value the rules and the dashboard's panels use is in
  a real `s3lect run --metrics-listen` scrape (and in docs/metrics.md).
- The dashboard parses, every panel has a title, a datasource and targets,
  and every expression is valid PromQL.

promtool comes from Debian's prometheus package, which scripts/deps installs;
without it these tests fail saying so. Every process has a timeout; every
node is stopped.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest
import yaml
from harness import cli

prom_parser = pytest.importorskip(
    "prometheus_client.parser",
    reason="prometheus_client is missing: scripts/deps installs it (pip install prometheus_client)")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
RULES = ROOT / "examples" / "prometheus" / "s3lect-rules.yml"
UNIT_TESTS = Path(__file__).resolve().parent / "s3lect-rules.test.yml"
DASHBOARD = ROOT / "examples" / "grafana" / "s3lect-dashboard.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"

# Short timings (as tests/cli/test_cli_metrics.py): lease 3 s.
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "300ms", "--infrequent-interval", "600ms",
          "--kill-timeout", "300ms"]
SCRAPE_S = 0.5  # real seconds between two scrapes of the recorded run
STEP_S = 30  # what one scrape becomes in promtool's time: the largest scrape
# interval the rules are written for (examples/prometheus/s3lect-rules.yml)
LOOKBACK_STEPS = 300 // STEP_S  # Prometheus' 5 minute lookback


def rules() -> list[dict]:
    return yaml.safe_load(RULES.read_text())["groups"][0]["rules"]


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: scripts/deps installs it with Debian's "
                    "prometheus package (apt-get install prometheus provides /usr/bin/promtool)")
    return path


def run_promtool(promtool: str, *args: str, cwd: Path | None = None) -> str:
    r = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"promtool {' '.join(args)} failed ({r.returncode}):\n{out}"
    return out


def test_promtool_checks_the_rules(promtool):
    out = run_promtool(promtool, "check", "rules", str(RULES))
    assert f"SUCCESS: {len(rules())} rules found" in out, out
    for r in rules():
        assert r["alert"].startswith("S3lect"), r
        assert "for" in r and r["labels"]["severity"] in ("critical", "warning"), r
        ann = r["annotations"]
        assert ann["summary"] and ann["description"], r
        anchor = r["alert"].lower()
        assert ann["runbook_url"] == f"docs/operations.md#{anchor}", r
        assert re.search(rf"^### {r['alert']}$", OPERATIONS_DOC.read_text(), re.M), (
            f"docs/operations.md has no heading '### {r['alert']}' for the runbook link")


def test_promtool_unit_tests_on_synthetic_series(promtool):
    out = run_promtool(promtool, "test", "rules", str(UNIT_TESTS))
    assert "SUCCESS" in out, out
    # every alert has a case where it fires and one where it must not
    fired, silent = set(), set()
    for group in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for t in group["alert_rule_test"]:
            (fired if t.get("exp_alerts") else silent).add(t["alertname"])
    names = {r["alert"] for r in rules()}
    assert names == fired, f"alerts without a firing case: {names - fired}"
    assert names == silent, f"alerts without a near miss: {names - silent}"


# ---- the metrics the rules and the dashboard use exist ----

METRIC = re.compile(r"\b(s3lect_[a-z0-9_]+)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def rule_exprs() -> list[str]:
    return [r["expr"] for r in rules()]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panel_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def scrape_samples(text: str) -> dict:
    """(name, sorted labels) -> value of one exposition."""
    out = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_every_metric_and_label_used_exists_in_a_real_scrape(tmp_path):
    node = cli.Node(BIN, tmp_path, f"file://{tmp_path}/lock.json", "a", cli.node_env(), TIMING,
                    cmd=["sleep", "60"], kill_timeout=None, metrics=True,
                    stdout=subprocess.DEVNULL)
    try:
        def leading_scrape():
            try:
                s = scrape_samples(node.metrics_text())
            except (OSError, urllib.error.URLError):
                return None
            names = {n for n, _ in s}
            return s if "s3lect_seconds_since_last_renewal" in names else None
        samples = cli.wait_for(leading_scrape, 20, "a leader's scrape with its renewal age")
    finally:
        node.stop()
    names = {n for n, _ in samples}
    doc = METRICS_DOC.read_text()
    missing = []
    for where, exprs in (("rules", rule_exprs()), ("dashboard", panel_exprs())):
        for expr in exprs:
            for name, sel in METRIC.findall(expr):
                if name not in names:
                    missing.append(f"{where}: {name} (in {expr.strip()!r})")
                    continue
                family = re.sub(r"_(bucket|sum|count)$", "", name)
                if f"`{family}`" not in doc:
                    missing.append(f"{where}: {family} is not in docs/metrics.md")
                for label, op, value in MATCHER.findall(sel or ""):
                    if "$" in value:  # a dashboard variable
                        continue
                    values = {dict(lb).get(label) for n, lb in samples if n == name}
                    want = value.split("|") if op in ("=~", "!~") else [value]
                    for v in want:
                        if v not in values:
                            seen = sorted(values, key=str)
                            missing.append(f"{where}: {name}{{{label}{op}\"{value}\"}}: no "
                                           f"sample has {label}=\"{v}\" (seen: {seen})")
    assert not missing, "used but not exported:\n" + "\n".join(missing)
    # the pattern finds the names (one that found none would check nothing):
    # the 9 rules use 9 families
    assert len({m for e in rule_exprs() for m, _ in METRIC.findall(e)}) == 9


# ---- the dashboard ----

def test_dashboard_panels_have_a_datasource_a_title_and_valid_targets(promtool, tmp_path):
    d = dashboard()
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["lock"]["type"] == "query"
    assert "s3lect_leader" in variables["lock"]["definition"]
    assert d["panels"], "no panels"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    exprs = []
    for p in d["panels"]:
        assert p.get("title"), p
        assert p.get("datasource", {}).get("uid") == "${datasource}", p["title"]
        assert p.get("targets"), f"panel {p['title']!r} has no target"
        for t in p["targets"]:
            assert t.get("expr"), f"panel {p['title']!r}: a target without an expression"
            assert t.get("datasource", {}).get("uid") == "${datasource}", p["title"]
            exprs.append(t["expr"])
    for want in ("s3lect_leader", "s3lect_term", "s3lect_leadership_transitions_total",
                 "s3lect_seconds_since_last_renewal", "s3lect_store_requests_total",
                 "s3lect_store_request_duration_seconds_bucket", "s3lect_peer_checks_total",
                 "s3lect_peer_fallbacks_total", "s3lect_writes_refused_seconds",
                 "s3lect_credential_fetches_total", "s3lect_log_lines_dropped_total"):
        assert any(want in e for e in exprs), f"no panel shows {want}"
    # Every expression is valid PromQL: promtool checks them as recording
    # rules, Grafana's variables replaced by what they stand for.
    recorded = [{"record": f"panel:{i}", "expr": e.replace("$__rate_interval", "1m")
                 .replace("$lock", ".*")} for i, e in enumerate(exprs)]
    f = tmp_path / "panels.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": recorded}]}))
    out = run_promtool(promtool, "check", "rules", str(f))
    assert f"SUCCESS: {len(exprs)} rules found" in out, out


# ---- series recorded from a real three-node run ----

class Recording:
    """Scrapes of every node, one round every SCRAPE_S seconds: rounds[k][id]
    is the node's samples, or None when its scrape failed."""

    def __init__(self, nodes: list[cli.Node]):
        self.nodes = nodes
        self.rounds: list[dict] = []
        self.next_at = time.monotonic()

    def scrape_round(self) -> dict:
        now = time.monotonic()
        if self.next_at > now:
            time.sleep(self.next_at - now)
        self.next_at = max(self.next_at, time.monotonic()) + SCRAPE_S
        r = {}
        for n in self.nodes:
            try:
                r[n.id] = scrape_samples(n.metrics_text())
            except (OSError, urllib.error.URLError):
                r[n.id] = None
        self.rounds.append(r)
        return r

    def leaders(self, r: dict) -> list[str]:
        return [i for i, s in r.items() if s and leader_value(s) == 1]

    def until(self, cond, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not cond(self.scrape_round()):
            assert time.monotonic() < end, f"timed out after {timeout} s waiting for {what}"

    def steady(self, n: int) -> None:
        for _ in range(n):
            self.scrape_round()


def leader_value(samples: dict) -> float | None:
    for (name, _), v in samples.items():
        if name == "s3lect_leader":
            return v
    return None


def series_of(rec: Recording, ports: dict[str, int]) -> dict:
    """{(name, labels) : [value or None (no sample) or "stale"] per round}, as
    Prometheus would store the scrapes: instance and job labels added; a
    series missing from a successful scrape, or whose target's scrape failed,
    gets a staleness marker once."""
    keys = set()
    for r in rec.rounds:
        for nid, s in r.items():
            if s:
                keys |= {(nid, k) for k in s}
    out = {}
    for nid, (name, labels) in sorted(keys):
        lbl = dict(labels, instance=f"127.0.0.1:{ports[nid]}", job="s3lect")
        vals: list = []
        for r in rec.rounds:
            s = r.get(nid)
            v = s.get((name, labels)) if s else None
            if v is None:
                v = "stale" if vals and vals[-1] not in (None, "stale") else None
            vals.append(v)
        out[(name, tuple(sorted(lbl.items())))] = vals
    up = {}
    for nid, port in ports.items():
        up[("up", (("instance", f"127.0.0.1:{port}"), ("job", "s3lect")))] = [
            1.0 if r.get(nid) else 0.0 for r in rec.rounds]
    out.update(up)
    return out


def instant(vals: list, k: int) -> float | None:
    """The value of a series at step k: its latest sample within the
    lookback, unless that is a staleness marker."""
    for j in range(k, max(-1, k - LOOKBACK_STEPS - 1), -1):
        if vals[j] is not None:
            return None if vals[j] == "stale" else vals[j]
    return None


def in_range(vals: list, k: int, steps: int) -> list[float]:
    """The samples of a range [k - steps, k] (both ends, as Prometheus 2)."""
    return [v for v in vals[max(0, k - steps):k + 1] if v not in (None, "stale")]


def select(series: dict, name: str, **match) -> dict:
    return {lb: v for (n, lb), v in series.items()
            if n == name and all(dict(lb).get(k) == w for k, w in match.items())}


def fire_steps(cond: list[bool], for_s: int) -> list[bool]:
    """Prometheus' `for`: active from the first step the condition holds,
    firing once it held for for_s seconds of steps without a break."""
    out, since = [], None
    for k, c in enumerate(cond):
        since = (k if since is None else since) if c else None
        out.append(since is not None and (k - since) * STEP_S >= for_s)
    return out


def render(text: str, labels: dict) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)


def test_alerts_on_series_recorded_from_a_three_node_run(promtool, tmp_path):
    lock = f"file://{tmp_path}/lock.json"
    nodes: list[cli.Node] = []
    try:
        for nid in ("a", "b", "c"):
            nodes.append(cli.Node(BIN, tmp_path, lock, nid, cli.node_env(), TIMING,
                                  cmd=["sleep", "120"], kill_timeout=None, metrics=True,
                                  stdout=subprocess.DEVNULL))
        rec = Recording(nodes)
        by_id = {n.id: n for n in nodes}
        # every node answers and one leads; then the recording starts
        cli.wait_for(lambda: (lambda r: all(r.values()) and len(rec.leaders(r)) == 1)(
            rec.scrape_round()), 20, "three nodes scraped, one leader")
        rec.rounds.clear()
        rec.steady(6)
        first = rec.leaders(rec.rounds[-1])[0]
        by_id[first].terminate()  # a handover: it releases and exits
        rec.until(lambda r: [i for i in rec.leaders(r) if i != first], 15,
                  "the next leader after SIGTERM")
        assert by_id[first].wait(timeout=15) == 0
        rec.steady(6)
        second = rec.leaders(rec.rounds[-1])[0]
        t_kill = len(rec.rounds)
        by_id[second].kill9()  # a crash: no leader until the lease expires
        rec.until(lambda r: [i for i in rec.leaders(r) if i not in (first, second)], 20,
                  "the last node leads after the kill -9")
        rec.steady(6)
        ports = {n.id: n.metrics_port for n in nodes}
    finally:
        for n in nodes:
            n.stop()

    series = series_of(rec, ports)
    steps = len(rec.rounds)
    lead = select(series, "s3lect_leader")
    (lock_label,) = {dict(lb)["lock"] for lb in lead}  # one canonical lock label

    # What the recorded data implies, rule by rule.
    cond: dict[str, list[bool]] = {}
    leaders_at, present_at = [], []
    for k in range(steps):
        vals = {dict(lb)["id"]: instant(v, k) for lb, v in lead.items()}
        present = [i for i, v in vals.items() if v is not None]
        present_at.append(len(present))
        leaders_at.append(sorted(i for i, v in vals.items() if v == 1))
    # no leader among the series present, or none present but some in the last hour
    cond["S3lectNoLeader"] = [
        (not ls) if p > 0 else any(in_range(v, k, 3600 // STEP_S) for v in lead.values())
        for k, (p, ls) in enumerate(zip(present_at, leaders_at))]
    cond["S3lectTwoLeaders"] = [len(ls) > 1 for ls in leaders_at]
    terms = select(series, "s3lect_term")
    cond["S3lectLeadershipFlapping"] = [
        max(sum(1 for a, b in zip(s, s[1:]) if a != b)
            for s in (in_range(v, k, 900 // STEP_S) for v in terms.values())) > 3
        for k in range(steps)]
    peer_failed = select(series, "s3lect_peer_checks_total", result="failed")

    def increased(vals, k, window_s):
        """rate() or increase() over the window is above 0 (a drop is a reset)."""
        s = in_range(vals, k, window_s // STEP_S)
        return len(s) >= 2 and sum(b - a if b >= a else b for a, b in zip(s, s[1:])) > 0
    cond["S3lectPeerChecksFailing"] = [
        any(increased(v, k, 300) for v in peer_failed.values()) for k in range(steps)]
    by_rule = {r["alert"]: r for r in rules()}
    for_s = {name: parse_duration(r["for"]) for name, r in by_rule.items()}
    firing = {name: fire_steps(c, for_s[name]) for name, c in cond.items()}
    # The kill -9 left the lock without a leader for about the lease less one
    # renew interval (2.5 s, 4 or 5 scrapes): longer than the `for` (1m, 2
    # steps: 3 scrapes in a row fire).
    gap = max(len(run) for run in "".join("0" if c else "1" for c in
                                          cond["S3lectNoLeader"][t_kill:]).split("1"))
    assert gap >= 3, f"no-leader gap after the kill -9: only {gap} scrapes"
    assert any(firing["S3lectNoLeader"][t_kill:]), "the kill -9 gap must fire S3lectNoLeader"
    assert not any(firing["S3lectTwoLeaders"]), (
        f"two leaders in the recorded scrapes for over a minute: {leaders_at}")

    # The other rules' conditions cannot hold in this run: check that from
    # the data (a failure here is a finding about the run, not the rules).
    def max_of(name, **m):
        return max((v for vs in select(series, name, **m).values() for v in vs
                    if v not in (None, "stale")), default=0.0)

    def changed(name, **m):
        return any(len({v for v in vs if v not in (None, "stale")}) > 1
                   for vs in select(series, name, **m).values())
    quiet = {
        "S3lectRenewalsFailing": max_of("s3lect_seconds_since_last_renewal") <= 7.5
        and not any(changed("s3lect_store_requests_total", op="put", outcome=o)
                    for o in ("auth", "transient", "fatal")),
        "S3lectWritesRefused": max_of("s3lect_writes_refused_seconds") <= 30,
        "S3lectCredentialRefreshFailing": not changed("s3lect_credential_fetches_total",
                                                      result="failed"),
        "S3lectCredentialFileErrors": not changed("s3lect_credential_file_errors_total"),
        "S3lectLogLinesDropped": not changed("s3lect_log_lines_dropped_total"),
    }
    assert all(quiet.values()), f"the recorded run was not quiet for: {quiet}"
    assert set(quiet) | set(cond) == set(by_rule), "a rule this test does not compute"
    for name in quiet:
        firing[name] = [False] * steps

    # The promtool test: the series, one step per scrape, and at every step
    # every alert's expected state.
    def fmt(v):
        return "_" if v is None else "stale" if v == "stale" else repr(float(v))
    input_series = [{"series": "%s{%s}" % (n, ",".join(f'{k}="{v}"' for k, v in lb)),
                     "values": " ".join(fmt(v) for v in vals)}
                    for (n, lb), vals in sorted(series.items())]
    checks = []
    for k in range(steps):
        for name, f in firing.items():
            t = {"eval_time": f"{k * STEP_S}s", "alertname": name}
            if f[k]:
                r = by_rule[name]
                labels = {"lock": lock_label}
                if name == "S3lectPeerChecksFailing":
                    ids = [dict(lb)["id"] for lb, v in peer_failed.items()
                           if increased(v, k, 300)]
                    assert len(ids) == 1, "several followers' checks failing: extend the test"
                    labels["id"] = ids[0]
                t["exp_alerts"] = [{
                    "exp_labels": dict(labels, **r["labels"]),
                    "exp_annotations": {a: render(v, labels) for a, v in r["annotations"].items()},
                }]
            checks.append(t)
    test = {"rule_files": [str(RULES)], "evaluation_interval": f"{STEP_S}s",
            "tests": [{"interval": f"{STEP_S}s", "input_series": input_series,
                       "alert_rule_test": checks}]}
    f = tmp_path / "recorded.test.yml"
    f.write_text(yaml.safe_dump(test, width=10**6))
    out = run_promtool(promtool, "test", "rules", str(f))
    assert "SUCCESS" in out, out
    summary = {n: sum(v) for n, v in firing.items()}
    print(f"recorded {steps} scrapes of 3 nodes ({len(series)} series); kill -9 gap {gap} "
          f"scrapes; firing steps per alert: {summary}")


def parse_duration(d: str) -> int:
    total = 0
    for n, unit in re.findall(r"(\d+)([smh])", d):
        total += int(n) * {"s": 1, "m": 60, "h": 3600}[unit]
    return total
