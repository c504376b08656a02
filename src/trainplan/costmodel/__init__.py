"""The physics: pure functions of specs and strategy arrays. No I/O.

Each function names its source and is written with plain arithmetic (and ``numpy.where``
instead of ``if`` on strategy values), so one call evaluates a single strategy (Python
numbers) or thousands of candidates (numpy arrays) with the same code.
"""
