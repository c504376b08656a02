"""``trainplan audit CLAIMS_FILE``: check a run's claimed facts against each other and the physics."""

from __future__ import annotations

from pathlib import Path

import typer

from trainplan.cli import cmdoptions as o


def audit_command(
    claims_file: Path = o.path_argument(..., "claims file", help="TOML/YAML/JSON file with a \\[claims] table "
                                       "(see trainplan/examples/source_case_claims.toml)"),
    json: bool = typer.Option(False, "--json", help="print the findings as JSON"),
) -> None:
    """Check a run's claims (hardware, samples x epochs, samples/s, FLOPs, days, memory, batch) against
    each other and against the physics; list each contradiction with its arithmetic.

    Exit status: 0 when nothing contradicts, 1 when something does, 2 for bad input.
    """
    from trainplan.errors import ChecksFailed
    from trainplan.services.audit import audit, findings_as_dicts, load_claims

    findings = audit(load_claims(claims_file))
    n_bad = findings.contradictions
    if json:
        from trainplan.report.echo import print_json
        print_json({"contradictions": n_bad, "findings": findings_as_dicts(findings)})
    else:
        from trainplan.report.audit import render_findings
        render_findings(findings, claims_file.name, n_bad)
    if n_bad:
        raise ChecksFailed(f"{n_bad} contradiction{'s' if n_bad != 1 else ''} in {claims_file.name}")
