# SPDX-License-Identifier: Apache-2.0
"""The Lua module inside a real embedded host: nginx with Debian's
libnginx-mod-http-lua (LuaJIT), the election driven from ngx.timer in each
worker (poll mode: el:dispatch() on nginx's own thread). Three nginx
instances on one file lock: exactly one leads; kill -9 of the leader's nginx
fails over after the lease; a graceful stop (nginx -s quit: the timer runs
with premature = true and stops the elector) hands over at once.

Needs nginx, libnginx-mod-http-lua (scripts/deps installs them) and the
LuaJIT build of the module (scripts/test-lua builds it into
build-lua/lua/jit; S3LECT_LUAJIT_MODULE_DIR overrides the directory).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from harness.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
MODULE_DIR = Path(os.environ.get("S3LECT_LUAJIT_MODULE_DIR", ROOT / "build-lua" / "lua" / "jit"))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
LUA_MODULE = Path("/usr/lib/nginx/modules/ngx_http_lua_module.so")
NDK_MODULE = Path("/usr/lib/nginx/modules/ndk_http_module.so")

missing = [str(p) for p in (Path(NGINX), LUA_MODULE, NDK_MODULE, MODULE_DIR / "s3lect.so")
           if not p.exists()]
pytestmark = pytest.mark.skipif(
    bool(missing), reason=f"missing {', '.join(missing)}: run scripts/deps (nginx, "
                          f"libnginx-mod-http-lua) and scripts/test-lua (the LuaJIT module)")

CONF = """
{user}
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log notice;
load_module {ndk};
load_module {lua};
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    lua_package_cpath "{module_dir}/?.so;;";
    init_worker_by_lua_block {{
        local s3lect = require "s3lect"
        local el, err = s3lect.new{{
            lock = "{lock}", id = "{id}",
            lease_timeout = 3, renew_interval = 0.5, renew_deadline = 2,
            frequent_interval = 0.3, infrequent_interval = 0.6,
            on_acquire = function(term)
                ngx.log(ngx.NOTICE, "s3lect: acquired leadership term=", term)
            end,
            on_lose = function(term, reason)
                ngx.log(ngx.NOTICE, "s3lect: lost leadership term=", term, " reason=", reason)
            end,
        }}
        if not el then
            ngx.log(ngx.ERR, "s3lect.new: ", err)
            return
        end
        assert(el:start())
        package.loaded.s3lect_elector = el
        local function tick(premature)
            if premature then          -- nginx is stopping: release the lock
                el:stop()
                return
            end
            el:dispatch(0)
            local ok, terr = ngx.timer.at(0.05, tick)
            if not ok then ngx.log(ngx.ERR, "ngx.timer.at: ", terr) end
        end
        ngx.timer.at(0, tick)
    }}
    server {{
        listen 127.0.0.1:{port};
        location = /role {{
            content_by_lua_block {{
                local el = package.loaded.s3lect_elector
                if not el then ngx.status = 503 ngx.say("no elector") return end
                ngx.say(el:is_leader() and "leader" or "follower", " ", el:term())
            }}
        }}
    }}
}}
"""


class Nginx:
    def __init__(self, base: Path, lock: str, nid: str):
        self.id = nid
        self.dir = base / nid
        self.dir.mkdir(mode=0o777)
        self.port = free_port()
        conf = self.dir / "nginx.conf"
        conf.write_text(CONF.format(
            user="user root;" if os.geteuid() == 0 else "", dir=self.dir, ndk=NDK_MODULE,
            lua=LUA_MODULE, module_dir=MODULE_DIR, lock=lock, id=nid, port=self.port))
        self.proc = subprocess.Popen([NGINX, "-p", str(self.dir), "-c", str(conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def role(self) -> tuple[str, int] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/role", timeout=2) as r:
                role, term = r.read().decode().split()
                return role, int(term)
        except (OSError, ValueError):
            return None

    def log(self) -> str:
        p = self.dir / "error.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def kill9(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.kill9()


@pytest.fixture
def cluster(tmp_path):
    base = tmp_path / "nginx"
    base.mkdir(mode=0o777)
    lockdir = tmp_path / "locks"
    lockdir.mkdir(mode=0o777)
    os.chmod(tmp_path, 0o777)
    nodes = [Nginx(base, f"file://{lockdir}/leader.json", f"nginx-{i}") for i in range(3)]
    yield nodes
    for n in nodes:
        n.stop()


def wait_for(cond, timeout: float, what: str, nodes):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    logs = "\n".join(f"--- {n.id}\n{n.log()[-2000:]}" for n in nodes)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs}")


def leaders(nodes):
    roles = {n.id: n.role() for n in nodes}
    ls = [n for n in nodes if roles[n.id] and roles[n.id][0] == "leader"]
    return ls, roles


def one_leader(nodes):
    ls, roles = leaders(nodes)
    answered = [r for r in roles.values() if r]
    return ls[0] if len(ls) == 1 and len(answered) == len(nodes) else None


def test_one_nginx_leads_fails_over_and_hands_over(cluster):
    nodes = cluster
    leader = wait_for(lambda: one_leader(nodes), 30, "one leader among three nginx", nodes)
    # Stable: still exactly one, and every instance reports the same term.
    for _ in range(10):
        ls, roles = leaders(nodes)
        assert len(ls) <= 1, f"two leaders: {roles}"
        time.sleep(0.1)
    term = leader.role()[1]
    assert all(r and r[1] == term for r in leaders(nodes)[1].values()), leaders(nodes)[1]

    # kill -9 of the leader's nginx (master and worker): another takes over.
    t0 = time.monotonic()
    leader.kill9()
    rest = [n for n in nodes if n is not leader]
    new = wait_for(lambda: one_leader(rest), 15, "a new leader after kill -9", nodes)
    took = time.monotonic() - t0
    assert new.role()[1] > term
    assert took < 3 + 0.3 + 3, f"failover took {took:.2f}s (lease 3 s)"

    # Graceful stop: nginx -s quit runs the timer prematurely, which stops the
    # elector and releases the lock: the last one leads at once.
    term = new.role()[1]
    t0 = time.monotonic()
    subprocess.run([NGINX, "-p", str(new.dir), "-c", str(new.dir / "nginx.conf"), "-s", "quit"],
                   check=True, timeout=20, capture_output=True)
    last = [n for n in rest if n is not new][0]
    wait_for(lambda: (last.role() or ("", 0))[0] == "leader", 10, "handover after quit", nodes)
    took = time.monotonic() - t0
    assert new.proc.wait(timeout=15) == 0
    assert "reason=stopped" in new.log(), new.log()[-2000:]
    assert last.role()[1] > term
    assert took < 2.5, f"graceful handover took {took:.2f}s"
    for n in nodes:
        bad = [ln for ln in n.log().splitlines()
               if any(f"[{lvl}]" in ln for lvl in ("error", "crit", "alert", "emerg"))]
        assert not bad, f"{n.id}: {bad[:5]}"
