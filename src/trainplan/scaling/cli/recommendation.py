"""The bare ``trainplan scale`` output at 80 columns: the budget and the MFU behind it, the
recommended allocation as key-value rows, the other laws as a range and a short-id table with a
legend, and the proposed architecture."""

from __future__ import annotations

from trainplan.scaling.cli.common import si


def kv_table(title: str, rows: list[tuple[str, str]]):
    """A two-column key-value table (stays narrow however long the values are)."""
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("key", no_wrap=True, style="bold")
    t.add_column("value", overflow="fold")
    for k, v in rows:
        t.add_row(k, v)
    return t


def print_budget_block(c, budget) -> None:
    """Budget line; the MFU used and where it came from; which constraint binds."""
    c.print(f"[bold]Budget:[/bold] {budget.explanation}", highlight=False)
    if budget.mfu is not None:
        c.print(f"[bold]MFU:[/bold] {budget.mfu:.3g} from {budget.mfu_source}", highlight=False)
    if len(budget.constraints) > 1:
        allowed = ", ".join(f"{k} {v:.3g}" for k, v in budget.constraints.items())
        c.print(f"[bold]FLOPs each budget allows:[/bold] {allowed}", highlight=False)
    extra = []
    if budget.days is not None:
        extra.append(f"{budget.days:.3g} days on {budget.gpus} GPUs")
    if budget.cost_usd is not None:
        extra.append(f"${budget.cost_usd:,.0f} at ${budget.usd_per_gpu_hour:.4g}/GPU-hour")
    if extra:
        c.print("[bold]Spends:[/bold] " + "; ".join(extra), highlight=False)


def print_recommendation(c, rec, arch) -> None:
    """The recommended (N, D), the range of the other laws, and the proposed architecture."""
    from rich.table import Table

    from trainplan.scaling.recommend import short_id

    r = rec.recommended
    rows = [("law", f"{r.law} ({r.label})"), ("why", rec.why), ("N (params)", si(r.n_params)),
            ("D (tokens)", si(r.tokens)), ("tokens/param", f"{r.tokens_per_param:.1f}"),
            ("loss", "-" if r.loss is None else f"{r.loss:.4f} (this law's units)")]
    c.print(kv_table("Recommended", rows))
    rg = rec.range
    if "n_params" in rg:
        n, d = rg["n_params"], rg["tokens"]
        c.print(f"[bold]Other laws ({', '.join(short_id(x) for x in rg['laws'])}):[/bold] "
                f"N {si(n['min'])}-{si(n['max'])}, D {si(d['min'])}-{si(d['max'])}", highlight=False)
    for law, why in rg.get("excluded", {}).items():
        c.print(f"{short_id(law)} left out of the range: {why}", style="dim")
    t = Table(title="Every law (detail)", title_justify="left")
    for col in ("id", "N", "D", "D/N", "loss"):
        t.add_column(col, no_wrap=True)
    for a in [rec.recommended, *rec.others]:
        mark = "*" if a is rec.recommended else ""
        t.add_row(short_id(a.law) + mark, si(a.n_params), si(a.tokens), f"{a.tokens_per_param:.1f}",
                  "-" if a.loss is None else f"{a.loss:.4f}")
    c.print(t)
    c.print("* recommended. " + "; ".join(f"{short_id(a.law)} = {a.law}" for a in [rec.recommended, *rec.others]),
            style="dim", highlight=False)
    if arch is not None:
        c.print(kv_table("Proposed architecture (Llama-3 shapes)", [
            ("layers", str(arch.layers)), ("hidden", str(arch.hidden)),
            ("heads / KV heads", f"{arch.heads} / {arch.kv_heads} (head dim {arch.head_dim})"),
            ("FFN (SwiGLU)", str(arch.ffn_hidden)), ("vocab", f"{arch.vocab:,}"),
            ("parameters", f"{si(arch.n_params)} ({arch.n_params / r.n_params - 1:+.1%} of N)"),
            ("hidden/layers", f"{arch.aspect_ratio:.0f}"),
        ]))
        c.print("Shapes: Llama 3 (arXiv:2407.21783 Table 3): hidden/layers ~128, head dim 128, "
                "8 KV heads, FFN 3.5x hidden; Chinchilla 8192/80.", style="dim", highlight=False)
