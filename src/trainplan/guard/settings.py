"""The Guard's settings check: a clear InputError for a setting that would silently misbehave
(see :mod:`trainplan.guard`)."""

from __future__ import annotations

import signal


def _check_settings(every_steps, interval_s, metadata_url, poll_s, signals, keep) -> None:
    """InputError (field, value, what is valid) for a setting that would silently misbehave."""
    import math

    from trainplan.errors import InputError

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    def is_pos(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf

    if every_steps is not None and not (is_int(every_steps) and every_steps >= 1):
        raise InputError("every_steps", every_steps, "an integer >= 1, or None (no step interval)")
    if interval_s is not None and not is_pos(interval_s):
        raise InputError("interval_s", interval_s, "a finite number of seconds > 0, or None")
    if not is_pos(poll_s):
        raise InputError("poll_s", poll_s, "a finite number of seconds > 0")
    if not (is_int(keep) and keep >= 1):
        raise InputError("keep", keep, "an integer >= 1 (complete checkpoints kept)")
    if metadata_url is not None and not (isinstance(metadata_url, str)
                                         and metadata_url.startswith(("http://", "https://"))):
        raise InputError("metadata_url", metadata_url, "an http:// or https:// URL, or None")
    for name in signals:
        if not (isinstance(name, str) and name.startswith("SIG")
                and isinstance(getattr(signal, name, None), signal.Signals)):
            raise InputError("signals", name, "signal names such as SIGTERM, SIGUSR1")
