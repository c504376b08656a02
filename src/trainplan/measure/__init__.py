"""Ground truth from real PyTorch code (optional ``torch`` extra): memory traces of one training
step (``memtrace``, ``step``), micro-benchmarks (``bench``) and measured training steps
(``distributed``). Nothing here is imported by the planner; torch is imported lazily."""
