"""measure step's table shows 'n/a' where nothing is predicted (FSDP2), not 'nan'."""

from __future__ import annotations


def test_fsdp_step_table_has_no_nan(capsys):
    from trainplan.report.measure import render_step
    res = {"model": "tiny", "nproc": 2, "backend": "gloo", "measured_step_s": 0.5,
           "predicted_step_s": 0.4, "measured_peak_gib": 18.89 / 1024,
           "predicted_peak_gib": float("nan"), "note": "memory: FSDP2 is not modelled"}
    render_step(res, True)
    out = capsys.readouterr().out
    assert "nan" not in out and "n/a" in out and "18.89" in out
