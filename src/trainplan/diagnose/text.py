"""Text as a terminal or a job launcher leaves it, made plain before it is parsed.

* ANSI escape sequences: colour codes that a terminal copy or a redirected log keeps
  (torchtitan colours every metrics line: "\\x1b[31mstep:  1  \\x1b[32mloss: ..."; rich/loguru
  tracebacks colour the error line);
* Windows (CRLF) and old Mac (CR) line ends;
* the per-line prefix a launcher adds to each process's output: torchrun's "[rank3]:" (and the
  older "[default3]:" of torchelastic's role/local-rank form), ``srun --label``'s "3: ". A
  message wrapped over several lines carries the prefix on each of them, inside the text.
"""

from __future__ import annotations

import re

# CSI (colours, cursor), OSC (window titles, hyperlinks) and the two-byte escapes
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_PREFIX = re.compile(r"^(?:[ \t]*(?:\[(?:rank|default)\d+\]:|\d{1,5}:(?=[ \t])))+[ \t]?", re.M)


def strip_terminal(text: str) -> str:
    """Without ANSI escape sequences, with ``\\n`` line ends."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def plain(text: str) -> str:
    """:func:`strip_terminal` and the launcher's rank prefix removed from every line."""
    return _PREFIX.sub("", strip_terminal(text))
