"""``trainplan schedule SCHEDULE.toml``: an elastic schedule's progress, resizes and cost."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from trainplan.cli import cmdoptions as o


def schedule_command(
    schedule_file: Optional[Path] = o.path_argument(
        None, "schedule file", help="schedule TOML (\\[cluster], \\[\\[job]], \\[\\[period]]); none: the source's day/night "
                   "example (examples/day_night.toml)"),
    as_json: bool = o.JSON,
) -> None:
    """Walk a schedule of periods (node counts and jobs): each job's progress, wall-clock and
    cost, what each resize costs (checkpoint, re-shard, restart; a layout per size from the
    planner), against fixed allocations running the same jobs."""
    from trainplan.resilience.schedule import read_schedule, run_schedule
    if schedule_file is None:
        from importlib import resources
        schedule_file = Path(str(resources.files("trainplan.examples").joinpath("day_night.toml")))
    out = run_schedule(read_schedule(schedule_file))
    if as_json:
        from trainplan.report.echo import print_json
        print_json(out)
    else:
        from trainplan.report.resilience import render_schedule
        render_schedule(out)
