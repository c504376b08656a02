"""The edges where trainplan meets files and terminals.

- :mod:`.limits`: the bounds on input sizes and magnitudes (names, job files, budgets, resamples);
- :mod:`.files`: checked, atomic writes of one file or of a set of files (regular files only,
  never through a symbolic link or onto a device or FIFO; ``force`` to overwrite; stale
  temporaries of killed runs cleaned up);
- :mod:`.jsonout`: the one strict JSON encoder of ``--json`` outputs (no NaN or Infinity);
- :mod:`.console`: error messages printed literally (no rich markup or emoji codes).
"""
