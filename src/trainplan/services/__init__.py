"""Services: what the commands and the Python API call.

Each takes validated requests or specs (built by :mod:`.jobfile` or :mod:`.requests`) and
returns typed results; none prints. Layering (enforced by import-linter, ``pyproject.toml``):
``cli``/``commands`` -> ``services`` -> the physics (``search``, ``costmodel``, ``scaling``, ...)
-> ``spec``/``catalog`` -> ``errors``/``conventions``.

* :mod:`.estimate` -- :func:`trainplan.estimate` and ``trainplan estimate``
* :mod:`.plan` -- :func:`trainplan.plan` and ``trainplan plan``
* :mod:`.audit` -- ``trainplan audit``
* :mod:`.jobfile` -- job files and flags -> specs
* :mod:`.requests` -- the plan, budget and loader-benchmark requests
"""
