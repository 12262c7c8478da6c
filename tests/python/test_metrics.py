# SPDX-License-Identifier: Apache-2.0
"""s3lect.metrics_text(): the Prometheus exposition of Python electors, parsed
by prometheus_client's own parser (docs/metrics.md)."""
from __future__ import annotations

import time

import pytest

import s3lect

prom_parser = pytest.importorskip(
    "prometheus_client.parser",
    reason="prometheus_client is missing: scripts/deps installs it (pip install prometheus_client)")


def samples(text: str) -> dict:
    out = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_of_two_electors(tmp_path):
    lock = f"file://{tmp_path}/lock.json"
    kw = dict(lock=lock, lease_timeout=1.5, renew_interval=0.3, renew_deadline=0.9,
              frequent_interval=0.2, infrequent_interval=0.6)
    a = s3lect.Elector(server_id="a", **kw)
    b = s3lect.Elector(server_id="b", **kw)
    try:
        a.start()
        a.wait_for_leadership(5)
        b.start()
        time.sleep(1.2)
        got = samples(s3lect.metrics_text(a, b))

        def v(name, nid, **labels):
            return got.get((name, tuple(sorted(dict(labels, lock=lock, id=nid).items()))))
        assert v("s3lect_leader", "a") == 1 and v("s3lect_leader", "b") == 0
        assert v("s3lect_term", "a") == a.term
        assert v("s3lect_leadership_transitions_total", "a", reason="acquired") == 1
        assert v("s3lect_store_requests_total", "a", op="put", outcome="ok") >= 2
        assert v("s3lect_store_requests_total", "b", op="get", outcome="ok") >= 1
        assert v("s3lect_seconds_since_last_renewal", "b") is None
        assert s3lect.METRICS_CONTENT_TYPE.startswith("text/plain; version=0.0.4")
        assert "s3lect_credential_fetches_total" in s3lect.metrics_text()
    finally:
        a.close()
        b.close()
    with pytest.raises(TypeError):
        s3lect.metrics_text("not an elector")  # type: ignore[arg-type]
