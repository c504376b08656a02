"""The data side of a plan: image tokens per architecture (``tokens``), padding and packing measured
from per-sample lengths (``lengths``), and data-loader throughput (``loader``). Light: numpy only;
Pillow and pyarrow are imported inside the functions that need them."""

from trainplan.contract import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
