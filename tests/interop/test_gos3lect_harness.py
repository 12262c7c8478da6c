# SPDX-License-Identifier: Apache-2.0
"""The skip path of the interop suite: tests/harness/gos3lect.py says exactly
why it cannot build the Go s3lect node (a skipped test cannot test its own
skip). No Go s3lect checkout, MinIO or Go toolchain is needed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import gos3lect


def test_unset_says_to_set_gos3lect_src():
    with pytest.raises(gos3lect.Unavailable) as e:
        gos3lect.build_node({"HOME": "/nonexistent"})
    msg = str(e.value)
    assert msg.startswith("GOS3LECT_SRC is not set")
    assert "github.com/nadrama-com/s3lect" in msg and "c45cfbd" in msg


def test_blank_counts_as_unset():
    with pytest.raises(gos3lect.Unavailable, match="^GOS3LECT_SRC is not set"):
        gos3lect.find_source({"GOS3LECT_SRC": "  "})


def test_missing_directory(tmp_path: Path):
    d = tmp_path / "nowhere"
    with pytest.raises(gos3lect.Unavailable) as e:
        gos3lect.find_source({"GOS3LECT_SRC": str(d)})
    assert f"GOS3LECT_SRC={d} is not a directory" in str(e.value)


def test_empty_directory(tmp_path: Path):
    with pytest.raises(gos3lect.Unavailable) as e:
        gos3lect.build_node({"GOS3LECT_SRC": str(tmp_path), "S3LECT_CACHE": str(tmp_path)})
    assert (f"GOS3LECT_SRC={tmp_path} has no go.mod, so it is not a Go s3lect checkout"
            in str(e.value))
    assert not (tmp_path / "gos3lect").exists(), "nothing is built or cached for a bad checkout"


def test_another_module(tmp_path: Path):
    (tmp_path / "go.mod").write_text("module example.com/other\n\ngo 1.23\n")
    with pytest.raises(gos3lect.Unavailable) as e:
        gos3lect.find_source({"GOS3LECT_SRC": str(tmp_path)})
    assert "is module example.com/other, not github.com/nadrama-com/s3lect" in str(e.value)


def test_right_module_without_the_api(tmp_path: Path):
    (tmp_path / "go.mod").write_text("module github.com/nadrama-com/s3lect\n\ngo 1.23\n")
    (tmp_path / "x.go").write_text("package s3lect\n\nfunc NewSomethingElse() {}\n")
    with pytest.raises(gos3lect.Unavailable, match="defines no NewS3Elector"):
        gos3lect.find_source({"GOS3LECT_SRC": str(tmp_path)})


def test_a_checkout_is_accepted(tmp_path: Path):
    (tmp_path / "go.mod").write_text("module github.com/nadrama-com/s3lect\n\ngo 1.23\n")
    (tmp_path / "s3lect.go").write_text(
        "package s3lect\n\nfunc NewS3Elector(opts S3ElectorOptions) (*S3Elector, error) {}\n")
    assert gos3lect.find_source({"GOS3LECT_SRC": str(tmp_path)}) == tmp_path.resolve()


def test_cache_dir_follows_s3lect_cache(tmp_path: Path):
    assert gos3lect.cache_root({"S3LECT_CACHE": str(tmp_path)}) == tmp_path / "gos3lect"
