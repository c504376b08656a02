"""Notebook display of the results: the console's own tables as HTML.

``est`` (an Estimate), ``result`` (a PlanResult), ``audit(...)``'s findings, a scaling
``recommend(...)`` or a ``fit_law(...)`` result as the last line of a Jupyter cell shows what
``trainplan estimate`` / ``plan`` / ``audit`` / ``scale`` / ``scale fit`` print: the same renderers
(:func:`trainplan.report.console.render_estimate`, :func:`trainplan.report.plan.render`,
:func:`trainplan.report.audit.render_findings`, :func:`trainplan.report.scale.
print_recommendation`, :func:`trainplan.report.scale_fit.print_fit`) drawn on
a recording rich console and exported with rich's ``export_html``, which escapes the text (a
model name is never read as HTML). Registered with :mod:`trainplan.display` on import (the
package root imports this module; rich is imported on first display only).
"""

from __future__ import annotations

from typing import Any, Callable

from trainplan.display import register_html

#: Console width of the notebook tables: the estimate's memory and step-time tables side by
#: side, the plan's layouts unfolded.
WIDTH = 120
_PRE = ('<pre style="font-family: Menlo, \'DejaVu Sans Mono\', consolas, \'Courier New\', '
        'monospace; line-height: 1.25; white-space: pre; overflow-x: auto">{code}</pre>')


def _html(draw: Callable[[Any], None]) -> str:
    """What ``draw(console)`` prints, as an HTML fragment with inline styles."""
    import io

    from rich.console import Console

    c = Console(record=True, file=io.StringIO(), width=WIDTH, force_terminal=True,
                color_system="truecolor", highlight=False, emoji=False)
    draw(c)
    return '<div class="trainplan">' + c.export_html(inline_styles=True, code_format=_PRE) \
        + "</div>"


def estimate_html(e: Any) -> str:
    """An Estimate as ``trainplan estimate`` prints it (memory and step time by component, the
    run's totals, warnings), in HTML."""
    from trainplan.report.console import render_estimate
    return _html(lambda c: render_estimate(e, console=c))


def plan_html(result: Any) -> str:
    """A PlanResult as ``trainplan plan`` prints it (the top layouts, the winner and why, the
    Pareto front), in HTML."""
    from trainplan.report.plan import render
    return _html(lambda c: render(result, console=c))


def audit_html(findings: Any) -> str:
    """:func:`trainplan.audit`'s findings as ``trainplan audit`` prints them (each verdict with
    its arithmetic), in HTML."""
    from trainplan.report.audit import render_findings
    return _html(lambda c: render_findings(findings, "the claims", findings.contradictions, c=c))


def recommendation_html(rec: Any) -> str:
    """A scaling :class:`~trainplan.scaling.recommendation.Recommendation` as ``trainplan scale``
    prints it (the recommended N and D, the other laws' range, every law), in HTML."""
    from trainplan.report.scale import print_recommendation
    return _html(lambda c: print_recommendation(c, rec, None))


def fit_html(result: Any) -> str:
    """A :func:`~trainplan.scaling.fit_law` result as ``trainplan scale fit`` prints the fit
    (each parameter with its interval, the fit's diagnostics), in HTML."""
    from trainplan.report.scale_fit import print_fit
    return _html(lambda c: print_fit(result, None, c=c))


register_html("estimate", estimate_html)
register_html("plan", plan_html)
register_html("audit", audit_html)
register_html("recommendation", recommendation_html)
register_html("fit", fit_html)
