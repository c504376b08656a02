"""Text as a terminal or a job launcher leaves it, made plain before it is parsed.

* ANSI escape sequences: colour codes that a terminal copy or a redirected log keeps
  (torchtitan colours every metrics line: "\\x1b[31mstep:  1  \\x1b[32mloss: ..."; rich/loguru
  tracebacks colour the error line);
* Windows (CRLF) and old Mac (CR) line ends;
* the per-line prefix a launcher adds to each process's output: torchrun's "[rank3]:" (and the
  older "[default3]:" of torchelastic's role/local-rank form), ``srun --label``'s "3: ". A
  message wrapped over several lines carries the prefix on each of them, inside the text;
* the host prefix of a multi-node launcher: pdsh's "node-017: " (DeepSpeed's default multi-node
  runner, ``deepspeed/launcher/multinode_runner.py`` PDSHRunner, runs ``pdsh -S -w hosts``; pdsh
  labels each line with its host, pdsh(1) ``-N`` "disable hostname: labels") and Open MPI's
  ``--tag-output`` "[1,3]<stdout>:" (mpirun(1)). A host name is told from a Python exception
  ("RuntimeError: ...") or a log level ("INFO: ...") by :func:`_is_host`.
"""

from __future__ import annotations

import re
from collections import Counter

# CSI (colours, cursor), OSC (window titles, hyperlinks) and the two-byte escapes
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_PREFIX = re.compile(r"^(?:[ \t]*(?:\[(?:rank|default)\d+\]:|\d{1,5}:(?=[ \t])))+[ \t]?", re.M)
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:[ \t]?", re.M)
_LEAD = re.compile(r"^[ \t]*([A-Za-z0-9][A-Za-z0-9._-]*): (.*)$", re.M)
_EXCEPTION = re.compile(r"(?:Error|Exception|Warning|Interrupt|Exit)$")
_EXCEPTION_NEXT = re.compile(r"(?:\[(?:rank|default)\d+\]:\s*)?[A-Za-z_][\w.]*(?:Error|Exception):")


def strip_terminal(text: str) -> str:
    """Without ANSI escape sequences, with ``\\n`` line ends."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _is_host(token: str) -> bool:
    """A line's leading ``token:`` may be a host name: cluster host names carry a digit, a
    hyphen or a dot ("node017", "gpu-st-1", "ip-10-0-0-1.ec2.internal"), which neither a log
    level ("INFO") nor a bare word does; an exception's name ("torch.OutOfMemoryError") and a
    rank number (the srun form, :data:`_PREFIX`) are not hosts."""
    return (not token.isdigit() and re.search(r"[\d.-]", token) is not None
            and _EXCEPTION.search(token) is None)


def host_prefixes(text: str) -> set[str]:
    """The host names a launcher put before the lines of ``text``: tokens that pass
    :func:`_is_host`, each lead two lines or more and together at least half of the non-empty
    lines, or lead a line whose rest is an exception ("node3: torch.OutOfMemoryError: ...", a
    one-line paste)."""
    leads = [(m.group(1), m.group(2)) for m in _LEAD.finditer(text) if _is_host(m.group(1))]
    if not leads:
        return set()
    # a host leads many lines; a key of a printed config ("seq-length: 4096") only one
    counts = {t: n for t, n in Counter(t for t, _ in leads).items() if n >= 2}
    lines = sum(1 for line in text.split("\n") if line.strip())
    if counts and 2 * sum(counts.values()) >= lines:
        return set(counts)
    return {t for t, rest in leads if _EXCEPTION_NEXT.match(rest)}


def plain(text: str) -> str:
    """:func:`strip_terminal`, then the launcher's host and rank prefixes removed from every
    line."""
    text = _MPI_TAG.sub("", strip_terminal(text))
    hosts = host_prefixes(text)
    if hosts:
        alt = "|".join(re.escape(h) for h in sorted(hosts, key=len, reverse=True))
        text = re.sub(rf"^[ \t]*(?:{alt}): ?", "", text, flags=re.M)
    return _PREFIX.sub("", text)
