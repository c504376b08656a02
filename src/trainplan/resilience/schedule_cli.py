"""``trainplan schedule SCHEDULE.toml``: an elastic schedule's progress, resizes and cost."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from pathlib import Path
from typing import Optional

import typer


def schedule_command(
    schedule_file: Optional[Path] = typer.Argument(
        None, help="schedule TOML ([cluster], [[job]], [[period]]); none: the source's day/night "
                   "example (examples/day_night.toml)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Walk a schedule of periods (node counts and jobs): each job's progress, wall-clock and
    cost, what each resize costs (checkpoint, re-shard, restart; a layout per size from the
    planner), against fixed allocations running the same jobs."""
    from trainplan.cli import fail
    from trainplan.errors import TrainplanError
    from trainplan.resilience.schedule import read_schedule, run_schedule
    try:
        if schedule_file is None:
            from importlib import resources
            schedule_file = Path(str(resources.files("trainplan.examples").joinpath("day_night.toml")))
        out = run_schedule(read_schedule(schedule_file))
    except TrainplanError as e:
        fail(e)
        return
    if as_json:
        typer.echo(strict_json(out))
        return
    _render(out)


def _render(out: dict) -> None:
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
