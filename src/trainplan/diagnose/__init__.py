"""Diagnose a real run from its own artifacts against trainplan's plan.

Pure parsing and comparison (no torch at import):

* :mod:`~trainplan.diagnose.oom` reads ``torch.OutOfMemoryError`` messages, the text of
  ``torch.cuda.memory_summary()`` and memory-snapshot pickles (with a restricted unpickler);
  :mod:`~trainplan.diagnose.oomplan` compares them with ``trainplan.estimate`` by component and
  ranks the changes that fit.
* :mod:`~trainplan.diagnose.trace` streams Kineto Chrome traces into a per-step breakdown;
  :mod:`~trainplan.diagnose.ranks` compares ranks (stragglers).
* :mod:`~trainplan.diagnose.logs` reads step lines of Megatron-LM, NeMo, torchtitan, DeepSpeed
  and HF Trainer logs.
"""
