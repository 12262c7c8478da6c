# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the interop suite: Go s3lect nodes (bench/peers/gos3lect, built
from GOS3LECT_SRC by tests/harness/gos3lect.py) and `s3lect run` nodes of the
build directory on one MinIO lock, each talking to MinIO through its own
counting proxy, every stderr line stamped with time.monotonic() on arrival.

Without a Go s3lect checkout the tests that need one skip, saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from harness import gos3lect
from harness.pki import issue, make_ca
from interop_cluster import Cluster


@pytest.fixture(scope="session")
def gonode() -> Path:
    try:
        return gos3lect.build_node()
    except gos3lect.Unavailable as e:
        pytest.skip(f"Go s3lect interop not run: {e}")
    except gos3lect.BuildError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def cluster(s3lect_bin, gonode, minio, tmp_path, request) -> Iterator:
    made: list[Cluster] = []

    def make(key: str | None = None) -> Cluster:
        c = Cluster(s3lect_bin, gonode, minio, tmp_path,
                    key or f"interop/{request.node.name}-{len(made)}.json")
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 (both
    implementations serve their peer endpoint with it)."""
    d = tmp_path_factory.mktemp("interop-pki")
    ca, _ = make_ca(d, "ca", subject="/CN=s3lect interop test ca", constraints=False, key="rsa")
    # One certificate for every node, so it names every server id that a
    # follower checks in CA mode (docs/peer.md "Whose answer counts").
    cert, key = issue(d, "node", "ca", subject="/CN=127.0.0.1", key="rsa",
                      san="IP:127.0.0.1,DNS:localhost,DNS:c1,DNS:c2,DNS:c3,DNS:go1,DNS:go2")
    return {"ca": ca, "cert": cert, "key": key}
