"""The data side of a plan: image tokens per architecture (``tokens``), padding and packing measured
from per-sample lengths (``lengths``), and data-loader throughput (``loader``). Light: numpy only;
Pillow and pyarrow are imported inside the functions that need them."""

import importlib
from typing import Any

# The helpers a program may call, loaded on first use (PEP 562) so that importing the package
# stays light; each is checked at the call (trainplan.contract: bad arguments are InputError).
_EXPORTS: dict[str, str] = {
    "LengthData": "lengths",
    "read_lengths": "lengths",
    "make_test_images": "loader",
    "bench_images": "loader",
    "workers_needed": "loader",
    "stall_share": "loader",
    "LoaderBench": "loader",
    "pack_bfd_counts": "packing",
    "pack_ffd": "packing",
    "pack_optimal": "packing",
    "packing_efficiency": "packing",
    "document_span": "packing",
    "pad_to_max_efficiency": "padding",
    "pad_to_longest_efficiency": "padding",
    "bucketed_efficiency": "padding",
    "analyze": "padding",
    "PaddingReport": "padding",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from trainplan.contract import checked_export
    value = checked_export(getattr(importlib.import_module(f"{__name__}.{module}"), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
