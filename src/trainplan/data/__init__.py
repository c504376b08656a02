"""The data side of a plan: image tokens per architecture (``tokens``), padding and packing measured
from per-sample lengths (``lengths``), and data-loader throughput (``loader``). Light: numpy only;
Pillow and pyarrow are imported inside the functions that need them."""
