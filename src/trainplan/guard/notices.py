"""The Guard's watcher of cloud termination notices: one non-blocking request to the instance
metadata per poll (see :mod:`trainplan.guard`)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

_LOG_EVERY_S = 300.0          # a failing metadata endpoint is logged at most every 5 minutes
_AWS_TOKEN_TTL_S = 21600      # IMDSv2 token lifetime asked for (the maximum AWS allows)


def _why(e: BaseException) -> str:
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return f"{e.reason}"
    return f"{type(e).__name__}: {e}"


class _MetadataPoller:
    """One non-blocking request per ``poll()`` to a cloud's instance metadata; returns the
    notice text, or "" when there is none.

    * AWS (a ``/latest/meta-data/`` path): IMDSv2. ``PUT /latest/api/token`` with header
      ``X-aws-ec2-metadata-token-ttl-seconds`` gives a session token, sent as
      ``X-aws-ec2-metadata-token`` on each GET; renewed before it expires and on a 401
      (AWS EC2 User Guide, "Use the Instance Metadata Service to access instance metadata":
      with ``HttpTokens=required`` a request without a token gets 401). When the PUT fails the
      GET goes without a token (IMDSv1). ``spot/instance-action`` is 404 until a notice, then
      JSON {action, time} (EC2 User Guide, "Spot Instance interruption notices").
    * Azure (a ``/metadata/scheduledevents`` path): the Scheduled Events document is always
      200 JSON; only an event with ``EventType`` ``Preempt`` (a Spot eviction) or ``Terminate``
      is a notice (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
    * GCP and others: a non-empty body other than ``FALSE`` is a notice (GCE
      ``instance/preempted``: ``FALSE``, then ``TRUE``). A ``wait_for_change`` query is dropped:
      it makes the metadata server hold the request until the value *changes* (Compute Engine
      docs, "Query VM metadata: wait for change"; without ``last_etag`` a value that is already
      ``TRUE`` is not returned), so a poll with a short timeout would miss a notice that came
      between two polls.
    """

    def __init__(self, url: str, headers: dict[str, str], timeout: float = 2.0):
        import urllib.parse
        u = urllib.parse.urlsplit(url)
        q = [(k, v) for k, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True)
             if k != "wait_for_change"]
        self.url = urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(q)))
        self.headers, self.timeout = dict(headers), timeout
        self.kind = ("aws" if u.path.startswith("/latest/meta-data/") else
                     "azure" if u.path.rstrip("/").endswith("/metadata/scheduledevents") else
                     "plain")
        self.token_url = urllib.parse.urlunsplit((u.scheme, u.netloc, "/latest/api/token", "", ""))
        self.token: str | None = None
        self.token_until = 0.0

    def _aws_token(self) -> None:
        if self.token is not None and time.monotonic() < self.token_until:
            return
        req = urllib.request.Request(self.token_url, method="PUT", headers={
            "X-aws-ec2-metadata-token-ttl-seconds": str(_AWS_TOKEN_TTL_S)})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                self.token = r.read(4096).decode("ascii", "replace").strip() or None
        except (urllib.error.URLError, OSError, ValueError):
            self.token = None                   # no IMDSv2 here: IMDSv1 GETs
        self.token_until = time.monotonic() + _AWS_TOKEN_TTL_S * 0.9

    def _get(self) -> str:
        headers = dict(self.headers)
        if self.kind == "aws" and self.token:
            headers["X-aws-ec2-metadata-token"] = self.token
        req = urllib.request.Request(self.url, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            return r.read(1 << 16).decode("utf-8", "replace").strip()

    def poll(self) -> str:
        if self.kind == "aws":
            self._aws_token()
            try:
                body = self._get()
            except urllib.error.HTTPError as e:
                if e.code == 404:             # no notice yet
                    return ""
                if e.code != 401:
                    raise
                self.token = None             # expired or missing token: one new one, again
                self._aws_token()
                try:
                    body = self._get()
                except urllib.error.HTTPError as e2:
                    if e2.code == 404:
                        return ""
                    raise
            return body
        body = self._get()
        if self.kind == "azure":
            doc = json.loads(body)
            events = doc.get("Events") if isinstance(doc, dict) else None
            hits = [e for e in events or [] if isinstance(e, dict)
                    and e.get("EventType") in ("Preempt", "Terminate")]
            return json.dumps(hits[0]) if hits else ""
        return body if body and body.upper() != "FALSE" else ""
