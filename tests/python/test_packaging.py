# SPDX-License-Identifier: Apache-2.0
"""The sdist holds everything needed to build the extension away from the repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "bindings" / "python"


def core_sources():
    text = (REPO / "libs3lect" / "CMakeLists.txt").read_text()
    block = re.search(r"set\(S3LECT_SOURCES(.*?)\)", text, re.S)
    assert block, "S3LECT_SOURCES not found in libs3lect/CMakeLists.txt"
    return [s for s in block.group(1).split() if s.endswith(".c")]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    build_sdist = pytest.importorskip(
        "scikit_build_core.build", reason="scripts/test-python installs scikit-build-core"
    ).build_sdist
    out = tmp_path_factory.mktemp("sdist")
    cwd = os.getcwd()
    os.chdir(PKG)
    try:
        name = build_sdist(str(out))
    finally:
        os.chdir(cwd)
    return out / name


def test_sdist_contents(sdist):
    with tarfile.open(sdist) as tf:
        members = tf.getmembers()
    root = members[0].name.split("/")[0]
    names = {m.name[len(root) + 1:] for m in members}
    links = [m.name for m in members if m.issym() or m.islnk()]
    assert not links, f"the sdist stores links that break outside the repository: {links}"
    wanted = ["pyproject.toml", "CMakeLists.txt", "s3lect.i", "README.md", "LICENSE", "NOTICE",
              "s3lect/py.typed",
              "s3lect/__init__.py", "core/CMakeLists.txt", "core/libs3lect/CMakeLists.txt",
              "core/libs3lect/include/s3lect.h"]
    wanted += [f"core/libs3lect/{src}" for src in core_sources()]
    missing = [w for w in wanted if w not in names]
    assert not missing, f"missing from the sdist: {missing}"
    assert not any(n.startswith("build/") for n in names), "build output leaked into the sdist"


def test_metadata_has_project_urls_and_absolute_readme_links(sdist):
    """PyPI shows the README away from the repository: no relative link may
    be in it, and the metadata names where the project lives (issue 39
    item 9)."""
    with tarfile.open(sdist) as tf:
        pkg_info = next(m for m in tf.getmembers() if m.name.endswith("/PKG-INFO")
                        and m.name.count("/") == 1)
        text = tf.extractfile(pkg_info).read().decode()
    urls = dict(re.findall(r"^Project-URL: ([^,]+), (\S+)$", text, re.M))
    assert urls.get("Repository") == "https://github.com/s3lect/s3lect", urls
    assert {"Homepage", "Documentation", "Issues"} <= set(urls), urls
    links = re.findall(r"\]\(([^)]+)\)", text)
    relative = [x for x in links if not x.startswith(("https://", "http://", "#", "mailto:"))]
    assert not relative, f"relative links in the long description: {relative}"


def test_sdist_builds_standalone(sdist, tmp_path):
    """Configure and build the extension from the unpacked sdist alone."""
    swig = shutil.which("swig", path=os.path.dirname(sys.executable))
    if swig is None:
        pytest.skip("the swig package is not installed in this environment "
                    "(scripts/test-python installs it)")
    with tarfile.open(sdist) as tf:
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tf.extractall(tmp_path, **safe)
    src = next(tmp_path.iterdir())
    build = tmp_path / "build"
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    run = lambda *cmd: subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True,  # noqa: E731
                                      text=True, timeout=600)
    r = run("cmake", "-S", str(src), "-B", str(build), *gen, "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # A path inside the repository (not merely one sharing its prefix, such as
    # a cache directory named <repo>-cache next to it).
    inside = re.compile(re.escape(str(REPO)) + r"(?=[/;\s\"]|$)", re.M)
    assert not inside.search((build / "CMakeCache.txt").read_text()), \
        "the sdist build reached into the repository"
    r = run("cmake", "--build", str(build), "-j2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ext = list(build.glob("__core*.so"))
    assert ext, f"no extension built in {build}"


def test_core_type_stub_names_every_export():
    import s3lect._core as core

    stub = Path(core.__file__).with_name("_core.pyi")
    assert stub.exists(), "s3lect/_core.pyi is not installed"
    declared = set(re.findall(r"^(?:def )?([A-Za-z]\w*)\s*[:(]", stub.read_text(), re.M))
    exported = {n for n in dir(core) if not n.startswith("_") and n != "typing"}
    assert exported - declared == set(), "add these to bindings/python/s3lect/_core.pyi"
    assert declared - exported == set(), "remove these from bindings/python/s3lect/_core.pyi"
