"""Tables of ``trainplan measure``: a traced step's memory and measured steps."""

from __future__ import annotations

from typing import Any

from trainplan.conventions import GiB
from trainplan.report.echo import console, line
from trainplan.report.fmt import num


def render_memory(name: str, got: dict[str, float], pred: dict[str, Any], meas: Any,
                  accumulation: str = "") -> None:
    from rich.table import Table
    unit, uname = (GiB, "GiB") if got["total"] >= GiB else (GiB / 1024, "MiB")
    from rich.markup import escape
    t = Table(title=f"{escape(name)}: one training step, peak live tensor memory ({uname})")
    t.add_column("component")
    t.add_column("measured", justify="right")
    t.add_column("analytic (pytorch)", justify="right")
    for k in ("parameters", "gradients", "optimizer_states", "activations", "transient", "total"):
        t.add_row(k, num(got[k], "10.3f", scale=unit), num(pred[k], "10.3f", scale=unit))
    err = pred["total"] / got["total"] - 1.0
    c = console()
    c.print(t)
    c.print(f"measured peak in {meas.peak['phase']} at aten.{meas.peak['op']}; analytic peak: "
            f"{pred['phase']}; error {err:+.1%}. Mode: {'FakeTensorMode' if meas.fake else 'real'}"
            f"; attention kernels: {', '.join(meas.sdpa_kernels) or '-'}")
    c.print(f"measured categories ({uname}): " + ", ".join(
        f"{k} {v / unit:.3f}" for k, v in meas.peak.items()
        if k not in ("total", "phase", "op") and v))
    if accumulation:
        c.print(accumulation, highlight=False)


def render_step(res: dict[str, Any], fsdp: bool) -> None:
    from rich.table import Table
    t = Table(title=f"{res['model']}: {res['nproc']} ranks, {res['backend']}, "
                    f"{'FSDP2' if fsdp else 'DDP'}")
    t.add_column("quantity")
    t.add_column("measured", justify="right")
    t.add_column("predicted", justify="right")
    t.add_row("step time (s)", f"{res['measured_step_s']:.4f}", f"{res['predicted_step_s']:.4f}")
    import math
    pred = res.get("predicted_peak_gib")
    t.add_row("peak memory per rank (MiB)", f"{res['measured_peak_gib'] * 1024:.2f}",
              f"{pred * 1024:.2f}" if pred is not None and math.isfinite(pred) else "n/a")
    c = console()
    c.print(t)
    line(res["note"], c=c)
