"""A deadline or budget met at the predicted step but not at the slow end of the validation
(search/rank.py margin_lines): plan says so and names the best layout that meets it even there."""

from __future__ import annotations

import re

from trainplan.services.plan import plan

KW = dict(gpu="h100", gpus="8..256", seq_len=8192, global_batch=256, tokens=2e11,
          objective="fewest", framework="megatron")


def _line(r):
    return [x for x in r.explanation if "slow end" in x]


def test_deadline_missed_at_the_slow_end_names_a_layout_that_meets_it():
    r = plan("llama-3.1-8b", deadline_days=4.0, **KW)
    w, hi = r.top[0], r.top[0].accuracy.step_ratio_high
    assert w.totals.wall_clock_days <= 4.0 < w.totals.wall_clock_days * hi
    (line,) = _line(r)
    assert f"{w.totals.wall_clock_days * hi:.1f} days against the 4-day deadline" in line
    m = re.search(r"meeting them even there: (.+?) on (\d+)x .* \(([\d.]+) days", line)
    assert m, line
    # that layout is the fewest-GPU one whose slow end meets the deadline: re-plan with the
    # deadline divided by the ratio and the same objective picks it
    safe = plan("llama-3.1-8b", deadline_days=4.0 / hi, **KW).top[0]
    assert (safe.layout, safe.gpus) == (m.group(1), int(m.group(2)))
    assert safe.totals.wall_clock_days * hi <= 4.0


def test_limits_met_even_at_the_slow_end_say_so_and_no_limits_say_nothing():
    r = plan("llama-3.1-8b", deadline_days=30.0, **{**KW, "objective": "fastest"})
    assert _line(r) == [f"meets the limits even at the slow end of the 80% interval from "
                        f"published Megatron/NeMo, bf16 runs "
                        f"({r.top[0].accuracy.step_ratio_high:.2f}x the predicted step)"]
    assert _line(plan("llama-3.1-8b", **KW)) == []
