"""Services: what the commands and the Python API call.

Each takes validated requests or specs (built by :mod:`.jobfile` or :mod:`.requests`) and
returns typed results; none prints. Layering (import-linter contracts in ``pyproject.toml``):
``cli`` > ``commands`` > ``report`` > ``diagnose`` | ``measure`` | ``guard`` | ``resilience``
(analyses that call these services) > ``services`` > ``scaling`` | ``data`` | ``validation`` >
``search`` | ``export`` > ``catalog`` | ``costmodel`` > ``spec`` > ``errors`` | ``conventions``.

* :mod:`.estimate` -- :func:`trainplan.estimate` and ``trainplan estimate``
* :mod:`.plan` -- :func:`trainplan.plan` and ``trainplan plan``
* :mod:`.audit` -- ``trainplan audit``
* :mod:`.jobfile` -- job files and flags -> specs
* :mod:`.scale`, :mod:`.data` -- ``trainplan scale`` and ``trainplan data``
* :mod:`.requests` -- the plan, budget and loader-benchmark requests
"""
