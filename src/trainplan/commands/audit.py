"""``trainplan audit CLAIMS_FILE``: check a run's claimed facts against each other and the physics."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from pathlib import Path

import typer

from trainplan.errors import TrainplanError

MARK = {"contradiction": "[bold red]CONTRADICTION[/bold red]", "warning": "[yellow]WARNING[/yellow]",
        "ok": "[green]ok[/green]", "info": "[cyan]info[/cyan]"}


def audit_command(
    claims_file: Path = typer.Argument(..., help="TOML/YAML/JSON file with a [claims] table "
                                       "(see trainplan/examples/source_case_claims.toml)"),
    json: bool = typer.Option(False, "--json", help="print the findings as JSON"),
) -> None:
    """Check a run's claims (hardware, samples x epochs, samples/s, FLOPs, days, memory, batch) against
    each other and against the physics; list each contradiction with its arithmetic.

    Exit status: 0 when nothing contradicts, 1 when something does, 2 for bad input.
    """
    from rich.console import Console

    from trainplan.audit import audit, findings_as_dicts, load_claims
    try:
        findings = audit(load_claims(claims_file))
    except TrainplanError as e:       # InputError, MissingExtraError
        from trainplan.io.console import print_error
        print_error(e)
        raise typer.Exit(2)
    n_bad = sum(f.verdict == "contradiction" for f in findings)
    if json:
        typer.echo(strict_json({"contradictions": n_bad, "findings": findings_as_dicts(findings)}))
    else:
        c = Console(highlight=False, soft_wrap=True)
        for f in findings:
            c.print(f"{MARK[f.verdict]}  [bold]{f.check}[/bold]: {f.summary}")
            for line in f.arithmetic:
                c.print(f"    {line}", markup=False)
        c.print(f"\n{n_bad} contradiction{'s' if n_bad != 1 else ''} in {claims_file.name}"
                if n_bad else f"\nno contradictions in {claims_file.name}")
    raise typer.Exit(1 if n_bad else 0)
