"""Tables of ``trainplan resilience`` (purchase options) and ``trainplan schedule``."""

from __future__ import annotations


def render_options(out: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    con = Console()
    ck = out["checkpoint"]
    con.print(escape(f"{out['model']} on {out['gpus']} x {out['gpu']} ({out['nodes']} nodes, "
                     f"{out['layout']}): {out['work_days']:.2f} days of steps"), highlight=False)
    con.print(f"checkpoint {ck['gib']:.1f} GiB written by {ck['writers']} node(s) in "
              f"{ck['write_s']:.1f} s; restart {out['restart_minutes']:.1f} min incl. loading "
              f"{ck['read_gib']:.0f} GiB in {ck['load_s']:.1f} s; hardware failures "
              f"{out['failures_per_gpu_hour']:.3g} per GPU-hour", highlight=False)
    con.print(f"a save on notice needs {ck['launch_lead_s']} s (rest of a {ck['step_s']:.1f} s step "
              f"+ 2 x {ck['write_s']:.1f} s write + {ck['notice_margin_s']:.0f} s margin), the "
              "lead the launch files give it", highlight=False)
    t = Table(title=f"Purchase options ({out['provider']})")
    sim = "sim_days" in out["options"][0]
    for col in ["option", "$/GPU-h", "pre-empt/day", "notice", "interval h", "goodput",
                "wall days", "cost $"]:
        t.add_column(col)
    for r in out["options"]:
        price = f"{r['usd_per_gpu_hour']:.2f}" if r["usd_per_gpu_hour"] is not None else "-"
        cost = f"{r['cost_usd']:,.0f}" if r["cost_usd"] is not None else "-"
        notice = (f"{r['notice_s']:.0f} s " + ("saves" if r["saves_on_notice"] else "too short")
                  if r["preemptions_per_day"] else "-")
        cells = [r["option"], price, f"{r['preemptions_per_day']:.2f}", notice,
                 f"{r['interval_h']:.2f}", f"{r['goodput']:.4f}", f"{r['wall_days']:.2f}", cost]
        t.add_row(*cells)
    con.print(t)
    if sim:
        ts = Table(title="Monte Carlo (trainplan.resilience.simulate)")
        for col in ("option", "P10 days", "P50 days", "P90 days", "mean goodput"):
            ts.add_column(col)
        for r in out["options"]:
            d = r["sim_days"]
            if d is None:               # the simulation gave up (the warning below says why)
                ts.add_row(r["option"], "gave up", "-", "-", "-")
                continue
            ts.add_row(r["option"], f"{d['p10']:.3f}", f"{d['p50']:.3f}", f"{d['p90']:.3f}",
                       f"{r['sim_mean_goodput']:.4f}")
        con.print(ts)
    _sensitivity(con, out.get("sensitivity") or [])
    con.print(f"break-even spot discount: {out['break_even_spot_discount']:.2%} off on-demand "
              "(spot is cheaper when its discount is larger)", highlight=False)
    if out["spot_savings"] is not None:
        con.print(f"spot saves {out['spot_savings']:.1%} of the on-demand cost at these prices",
                  highlight=False)
    for w in out.get("warnings", []):
        con.print(escape(f"warning: {w}"), style="yellow", highlight=False)
    for r in out["options"]:
        con.print(escape(f"  {r['option']}: {r['price_source']}"), highlight=False)
        for n in r["notes"]:
            con.print(escape(f"    {n}"), highlight=False)


def _sensitivity(con, rows: list) -> None:
    """Which default moves goodput most: each at its measured range's ends, the others held."""
    from rich.markup import escape
    from rich.table import Table
    if not rows:
        return
    t = Table(title="Sensitivity: goodput with each default at the ends of its measured range "
                    "(largest swing first; sources: trainplan/resilience/data/defaults.json)")
    for col in ("default", "value", "measured range", "option", "goodput", "at low", "at high",
                "swing"):
        t.add_column(col)
    for r in rows:
        t.add_row(escape(r["name"]), f"{r['value']:.3g} {r['unit']}",
                  f"{r['low']:.3g}-{r['high']:.3g}", r["option"], f"{r['goodput']:.2%}",
                  f"{r['goodput_low']:.2%}", f"{r['goodput_high']:.2%}", f"{r['swing']:.2%}")
    con.print(t)


def render_schedule(out: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    con = Console()
    t = Table(title=f"Schedule on {out['gpu']} ({out['gpus_per_node']} GPUs per node): "
                    f"{out['wall_days']:.2f} days, ${out['cost_usd']:,.0f}"
                    + ("" if out["finished"] else " (NOT finished within max_days)"))
    for col in ("job", "progress", "done on day", "node-hours", "cost $", "starts", "layout per size"):
        t.add_column(col)
    for name, j in out["jobs"].items():
        t.add_row(escape(name), f"{j['progress']:.1%}",
                  f"{j['done_day']:.2f}" if j["done_day"] is not None else "-",
                  f"{j['node_hours']:,.0f}", f"{j['cost_usd']:,.0f}", str(j["resizes"]),
                  escape("; ".join(f"{n} nodes: {lay}" for n, lay in j["layouts"].items())))
    con.print(t)
    r = Table(title="Resizes (checkpoint out, restart, load in; re-shard when a job changes size)")
    for col in ("day", "to", "from", "write s", "restart s", "load s", "re-shard"):
        r.add_column(col)
    for ev in out["resizes"]:
        r.add_row(f"{ev['day']:.2f}", escape(f"{ev['job']} on {ev['nodes']} nodes ({ev['period']})"),
                  escape(ev.get("from", "-")), f"{ev['write_s']:.1f}", f"{ev['restart_s']:.0f}",
                  f"{ev['load_s']:.1f}", "yes" if ev["reshard"] else "no")
    con.print(r)
    f = Table(title="Fixed allocations: the same jobs back to back")
    for col in ("nodes", "wall days", "cost $", "vs schedule", "done within the schedule's budget"):
        f.add_column(col)
    for x in out["fixed"]:
        rel = x["cost_usd"] / out["cost_usd"] - 1 if out["cost_usd"] else 0.0
        f.add_row(str(x["nodes"]), f"{x['wall_days']:.2f}", f"{x['cost_usd']:,.0f}", f"{rel:+.1%}",
                  escape(", ".join(f"{k} {v:.0%}" for k, v in x["progress_at_budget"].items())))
    con.print(f)
