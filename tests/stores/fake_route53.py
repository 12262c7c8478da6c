# SPDX-License-Identifier: Apache-2.0
"""A strict fake of the two Route 53 API calls the Route 53 store makes, for
the one thing no runnable server checks: the change batch's rules.

moto (the only Route 53 server we can run) checks a DELETE against every
value a name ever had and lets a second CREATE through; this fake applies
what the Route 53 API reference documents for ChangeResourceRecordSets:

- a batch is applied atomically, or not at all;
- DELETE must name the record set exactly as it is (TTL and every value),
  else InvalidChangeBatch "... but the values provided do not match the
  current values" (or "... but it was not found");
- CREATE of a name and type that exist fails: InvalidChangeBatch "... but
  it already exists";

and ListResourceRecordSets (name, type, maxitems=1) answers the current
set. It checks no signature and keeps one hosted zone. It is a test double
of one layer (the store's requests and its reading of the answers), not a
stand-in for Route 53's availability or latency.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NS = "https://route53.amazonaws.com/doc/2013-04-01/"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class FakeRoute53:
    def __init__(self, zone: str = "ZFAKE0000000001", domain: str = "fake.example.com."):
        self.zone, self.domain = zone, domain
        self.sets: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
        self.lock = threading.Lock()
        self.refused = 0
        self.applied = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                u = urlsplit(self.path)
                if u.path != f"/2013-04-01/hostedzone/{fake.zone}/rrset":
                    return self._send(404, _error("NoSuchHostedZone", "No hosted zone found"))
                q = parse_qs(u.query)
                name, rtype = q.get("name", [""])[0].lower(), q.get("type", [""])[0]
                with fake.lock:
                    cur = fake.sets.get((name, rtype))
                sets = ""
                if cur:
                    ttl, values = cur
                    recs = "".join(f"<ResourceRecord><Value>{_esc(v)}</Value></ResourceRecord>"
                                   for v in values)
                    sets = (f"<ResourceRecordSet><Name>{name}</Name><Type>{rtype}</Type>"
                            f"<TTL>{ttl}</TTL><ResourceRecords>{recs}</ResourceRecords>"
                            f"</ResourceRecordSet>")
                self._send(200, f'<?xml version="1.0"?><ListResourceRecordSetsResponse xmlns="{NS}">'
                                f"<ResourceRecordSets>{sets}</ResourceRecordSets>"
                                f"<IsTruncated>false</IsTruncated><MaxItems>1</MaxItems>"
                                f"</ListResourceRecordSetsResponse>")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if urlsplit(self.path).path.rstrip("/") != f"/2013-04-01/hostedzone/{fake.zone}/rrset":
                    return self._send(404, _error("NoSuchHostedZone", "No hosted zone found"))
                try:
                    changes = _parse_batch(body)
                except (ET.ParseError, ValueError) as e:
                    return self._send(400, _error("InvalidInput", f"Invalid request: {e}"))
                status, answer = fake.apply(changes)
                self._send(status, answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def apply(self, changes) -> tuple[int, str]:
        with self.lock:
            trial = dict(self.sets)
            for action, name, rtype, ttl, values in changes:
                if not name.endswith(self.domain):
                    self.refused += 1
                    return 400, _batch_error(f"RRSet with DNS name {name} is not permitted in zone "
                                             f"{self.domain}")
                key = (name, rtype)
                cur = trial.get(key)
                what = f"[name='{name}', type='{rtype}']"
                if action == "DELETE":
                    if cur is None:
                        self.refused += 1
                        return 400, _batch_error(f"Tried to delete resource record set {what} but "
                                                 f"it was not found")
                    if cur != (ttl, values):
                        self.refused += 1
                        return 400, _batch_error(f"Tried to delete resource record set {what} but "
                                                 f"the values provided do not match the current "
                                                 f"values")
                    del trial[key]
                elif action == "CREATE":
                    if cur is not None:
                        self.refused += 1
                        return 400, _batch_error(f"Tried to create resource record set {what} but "
                                                 f"it already exists")
                    trial[key] = (ttl, values)
                else:
                    return 400, _error("InvalidInput", f"action {action} is not supported here")
            self.sets = trial
            self.applied += 1
        return 200, (f'<?xml version="1.0"?><ChangeResourceRecordSetsResponse xmlns="{NS}">'
                     f"<ChangeInfo><Id>/change/C{self.applied}</Id><Status>PENDING</Status>"
                     f"<SubmittedAt>2026-01-01T00:00:00Z</SubmittedAt></ChangeInfo>"
                     f"</ChangeResourceRecordSetsResponse>")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _error(code: str, message: str) -> str:
    return (f'<?xml version="1.0"?><ErrorResponse xmlns="{NS}"><Error><Type>Sender</Type>'
            f"<Code>{code}</Code><Message>{_esc(message)}</Message></Error>"
            f"<RequestId>fake</RequestId></ErrorResponse>")


def _batch_error(message: str) -> str:
    # As Route 53 sends it: the root element names the error, no <Code>.
    return (f'<?xml version="1.0"?><InvalidChangeBatch xmlns="{NS}"><Messages><Message>'
            f"{_esc(message)}</Message></Messages><RequestId>fake</RequestId></InvalidChangeBatch>")


def _parse_batch(body: bytes):
    root = ET.fromstring(body)
    out = []
    for ch in root.iter(f"{{{NS}}}Change"):
        action = ch.findtext(f"{{{NS}}}Action")
        rrs = ch.find(f"{{{NS}}}ResourceRecordSet")
        if rrs is None or not action:
            raise ValueError("a Change without Action or ResourceRecordSet")
        name = (rrs.findtext(f"{{{NS}}}Name") or "").lower()
        if not name.endswith("."):
            name += "."
        rtype = rrs.findtext(f"{{{NS}}}Type") or ""
        ttl = int(rrs.findtext(f"{{{NS}}}TTL") or "-1")
        values = tuple(v.text or "" for v in rrs.iter(f"{{{NS}}}Value"))
        out.append((action, name, rtype, ttl, values))
    if not out:
        raise ValueError("no changes")
    return out
