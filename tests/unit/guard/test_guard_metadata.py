"""trainplan.guard's metadata watcher against local stand-ins for the cloud endpoints: AWS
IMDSv2 with tokens required, GCP ``instance/preempted`` (a ``wait_for_change`` request is held
until the value changes), Azure Scheduled Events (always 200 JSON), and endpoints that fail.

No clock is asserted: every wait is for an event (a notice, a log line, the n-th request
served); the timeouts only stop a broken run from hanging."""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainplan.guard import Guard

HANG = 60.0          # an upper bound against hangs, never an expectation


class Meta:
    def __init__(self):
        owner = self
        self.notice, self.gets, self.puts, self.cond = False, 0, 0, threading.Condition()

        class H(BaseHTTPRequestHandler):
            def _send(self, code, body=b"", ctype="text/plain"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                with owner.cond:
                    owner.puts += 1
                if self.path == "/latest/api/token" and self.headers.get(
                        "X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._send(200, b"tok123")
                return self._send(400)

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                with owner.cond:
                    owner.gets += 1
                    owner.cond.notify_all()
                if u.path == "/latest/meta-data/spot/instance-action":       # IMDSv2 only
                    if self.headers.get("X-aws-ec2-metadata-token") != "tok123":
                        return self._send(401)
                    if not owner.notice:
                        return self._send(404)
                    return self._send(200, json.dumps({"action": "terminate",
                                                       "time": "2026-11-30T12:00:00Z"}).encode())
                if u.path == "/computeMetadata/v1/instance/preempted":
                    if self.headers.get("Metadata-Flavor") != "Google":
                        return self._send(403)
                    if q.get("wait_for_change") == "true" and "last_etag" not in q:
                        with owner.cond:       # held until the value changes
                            was = owner.notice
                            owner.cond.wait_for(lambda: owner.notice != was, timeout=HANG)
                    return self._send(200, b"TRUE" if owner.notice else b"FALSE")
                if u.path == "/metadata/scheduledevents":
                    if self.headers.get("Metadata") != "true":
                        return self._send(400)
                    ev = ([{"EventId": "1", "EventType": "Preempt", "ResourceType": "VirtualMachine",
                            "Resources": ["vm0"], "EventStatus": "Scheduled",
                            "NotBefore": "Mon, 30 Nov 2026 12:00:30 GMT"}] if owner.notice else [])
                    doc = {"DocumentIncarnation": int(owner.notice), "Events": ev}
                    return self._send(200, json.dumps(doc).encode(), "application/json")
                return self._send(404)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def set_notice(self):
        with self.cond:
            self.notice = True
            self.cond.notify_all()

    def wait_gets(self, n):
        with self.cond:
            assert self.cond.wait_for(lambda: self.gets >= n, timeout=HANG)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def meta():
    m = Meta()
    yield m
    m.close()


def _guard(tmp_path, url, headers=None, log=None):
    return Guard(str(tmp_path), every_steps=5, metadata_url=url, metadata_headers=headers,
                 poll_s=0.01, signals=(), log=log or (lambda m: None))


def test_aws_imdsv2_token_required_notice_is_seen(tmp_path, meta):
    g = _guard(tmp_path, meta.base + "/latest/meta-data/spot/instance-action")
    try:
        meta.wait_gets(3)
        assert not g.notice.is_set()
        meta.set_notice()
        assert g.notice.wait(HANG), "IMDSv2 notice never seen"
        assert '"terminate"' in g.notice_reason and meta.puts >= 1
    finally:
        g.close()


def test_gcp_documented_wait_for_change_url_sees_a_notice_already_set(tmp_path, meta):
    from trainplan.resilience.economics import provider
    doc_url = provider("gcp")["metadata_url"]
    path = urllib.parse.urlsplit(doc_url)
    meta.set_notice()                            # TRUE before the guard's first request
    g = _guard(tmp_path, meta.base + path.path + ("?" + path.query if path.query else ""),
               {"Metadata-Flavor": "Google"})
    try:
        assert g.notice.wait(HANG), "a TRUE that was already there was never seen"
        assert "TRUE" in g.notice_reason
    finally:
        g.close()


def test_gcp_wait_for_change_is_dropped_even_when_given(tmp_path, meta):
    meta.set_notice()
    g = _guard(tmp_path, meta.base + "/computeMetadata/v1/instance/preempted?wait_for_change=true",
               {"Metadata-Flavor": "Google"})
    try:
        assert g.notice.wait(HANG)
    finally:
        g.close()


def test_azure_scheduled_events_without_a_preempt_are_no_notice(tmp_path, meta):
    from trainplan.resilience.economics import provider
    path = urllib.parse.urlsplit(provider("azure")["metadata_url"])
    g = _guard(tmp_path, f"{meta.base}{path.path}?{path.query}", {"Metadata": "true"})
    try:
        meta.wait_gets(4)                        # three empty documents read and judged
        assert not g.notice.is_set(), g.notice_reason
        meta.set_notice()
        assert g.notice.wait(HANG)
        assert "Preempt" in g.notice_reason
    finally:
        g.close()


@pytest.mark.parametrize("path", ["/computeMetadata/v1/instance/preempted", "/nowhere"])
def test_a_failing_endpoint_is_logged_once_not_per_poll(tmp_path, meta, path):
    logged = []
    seen = threading.Event()

    def log(msg):
        logged.append(msg)
        seen.set()

    g = _guard(tmp_path, meta.base + path, log=log)          # 403 (no header) / 404
    try:
        assert seen.wait(HANG), "a failing metadata endpoint was never reported"
        meta.wait_gets(6)
    finally:
        g.close()
    warn = [m for m in logged if "metadata endpoint" in m]
    assert len(warn) == 1 and ("HTTP 403" in warn[0] or "HTTP 404" in warn[0]), logged


def test_an_unreachable_endpoint_is_logged(tmp_path):
    seen = threading.Event()
    logged = []

    def log(msg):
        logged.append(msg)
        seen.set()

    import socket
    with socket.socket() as s:                   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    g = _guard(tmp_path, f"http://127.0.0.1:{port}/latest/meta-data/spot/instance-action", log=log)
    try:
        assert seen.wait(HANG)
    finally:
        g.close()
    assert "metadata endpoint" in logged[0] and not g.notice.is_set()
