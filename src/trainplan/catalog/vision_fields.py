"""Reading vision fields of a Hugging Face config dict: each bad value is an InputError naming it.

A config.json is user input: a string, a NaN, a boolean or a negative number where a size belongs
must be reported as ``config.vision_config.<key>``, never surface as a ValueError, TypeError or
OverflowError from arithmetic further down.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from trainplan.errors import InputError

# no model size, layer count or pixel count in a config comes near 2^31; beyond it is a typo
MAX_SIZE = 2 ** 31 - 1


class Fields:
    """A config dict (or a nested part of it) with typed getters; ``prefix`` names it in errors."""

    def __init__(self, cfg: Any, prefix: str, defaults: dict[str, Any] | None = None):
        if cfg is None:
            cfg = {}
        if not isinstance(cfg, dict):
            raise InputError(prefix.rstrip("."), type(cfg).__name__, "a JSON object")
        self.prefix = prefix
        self.d = dict(defaults or {})
        self.d.update({k: v for k, v in cfg.items() if v is not None})

    def has(self, key: str) -> bool:
        return key in self.d

    def raw(self, key: str, default: Any = None) -> Any:
        return self.d.get(key, default)

    def _need(self, key: str, default: Any) -> Any:
        if key in self.d:
            return self.d[key]
        if default is None:
            raise InputError(self.prefix + key, None, "a value (the key is missing)")
        return default

    def int(self, key: str, default: int | None = None, minimum: int = 1,
            maximum: int = MAX_SIZE) -> int:
        """A whole number in [minimum, maximum] (JSON 14 or 14.0; a [14, 14] pair of equal sides)."""
        v = self._need(key, default)
        if isinstance(v, (list, tuple)) and len(v) == 2 and v[0] == v[1]:
            v = v[0]
        ok = isinstance(v, int) and not isinstance(v, bool) or (
            isinstance(v, float) and math.isfinite(v) and v.is_integer())
        if not ok or not minimum <= int(v) <= maximum:
            raise InputError(self.prefix + key, v, f"a whole number in [{minimum}, {maximum}]")
        return int(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.d.get(key, default)
        if not isinstance(v, bool):
            raise InputError(self.prefix + key, v, "true or false")
        return v

    def number(self, key: str, default: float | None = None, lo: float = 0.0, hi: float = math.inf) -> float:
        """A finite number in (lo, hi]."""
        v = self._need(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not lo < v <= hi:
            raise InputError(self.prefix + key, v, f"a number in ({lo:g}, {hi:g}]")
        return float(v)

    def ints(self, key: str, default: tuple[builtins.int, ...] = (),
             below: builtins.int = MAX_SIZE) -> tuple[builtins.int, ...]:
        """A list of whole numbers in [0, below) (layer indexes)."""
        v = self.d.get(key, default)
        if not isinstance(v, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < below for i in v):
            raise InputError(self.prefix + key, v, f"a list of layer indexes in 0..{below - 1}")
        return tuple(v)

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        v = self.d.get(key, default)
        if v not in allowed:
            raise InputError(self.prefix + key, v, "one of " + ", ".join(allowed))
        return v
