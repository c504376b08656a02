"""Tables of ``trainplan scale`` and its sub-commands. The bare ``trainplan scale`` output at
80 columns: the budget and the MFU behind it, the recommended allocation as key-value rows, the other laws as a range and a short-id table with a
legend, and the proposed architecture."""

from __future__ import annotations

from trainplan.report.echo import console
from trainplan.report.fmt import num


def kv_table(title: str, rows: list[tuple[str, str]]):
    """A two-column key-value table (stays narrow however long the values are)."""
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("key", no_wrap=True, style="bold")
    t.add_column("value", overflow="fold")
    for k, v in rows:
        t.add_row(k, v)
    return t


def spend_text(budget) -> str | None:
    """What the budget spends (days on GPUs; dollars at the price), as the CLI and the report
    print it; None when neither is known."""
    extra = []
    if budget.days is not None:
        extra.append(f"{budget.days:.3g} days on {budget.gpus} GPUs")
    if budget.cost_usd is not None:
        extra.append(f"${budget.cost_usd:,.0f} at ${budget.usd_per_gpu_hour:.4g}/GPU-hour")
    return "; ".join(extra) or None


def range_text(rec) -> str | None:
    """'Other laws (H22-1, ...): N a-b, D c-d': the range ``scaling.recommendation`` computed over the
    laws it keeps in the range (Kaplan 2020 left out), the one line the CLI and the report show."""
    from trainplan.scaling.recommendation import short_id
    rg = rec.range
    if "n_params" not in rg:
        return None
    n, d = rg["n_params"], rg["tokens"]
    return (f"Other laws ({', '.join(short_id(x) for x in rg['laws'])}): "
            f"N {num(n['min'])}-{num(n['max'])}, D {num(d['min'])}-{num(d['max'])}")


def excluded_texts(rec) -> list[str]:
    """One line per law shown but left out of the range, with the reason."""
    from trainplan.scaling.recommendation import short_id
    return [f"{short_id(law)} left out of the range: {why}"
            for law, why in rec.range.get("excluded", {}).items()]


def architecture_rows(arch, n_target: float) -> list[tuple[str, str]]:
    """The proposed architecture as (key, value) rows (:mod:`trainplan.scaling.architecture`)."""
    return [
        ("layers", str(arch.layers)), ("hidden", str(arch.hidden)),
        ("heads / KV heads", f"{arch.heads} / {arch.kv_heads} (head dim {arch.head_dim})"),
        ("FFN (SwiGLU)", str(arch.ffn_hidden)), ("vocab", f"{arch.vocab:,}"),
        ("parameters", f"{num(arch.n_params)} ({arch.matched_params / n_target - 1:+.1%} of N"
                       + (f"; {num(arch.non_embedding_params)} without embeddings, as "
                          "this law counts N)" if arch.non_embedding_target else ")")),
        ("hidden/layers", f"{arch.aspect_ratio:.0f}"),
    ]


ARCH_SHAPES = ("Shapes: Llama 3 (arXiv:2407.21783 Table 3): hidden/layers ~128, head dim 128, "
               "8 KV heads, FFN 3.5x hidden; Chinchilla 8192/80.")


def print_budget_block(c, budget) -> None:
    """Budget line; the MFU used and where it came from; which constraint binds."""
    c.print(f"[bold]Budget:[/bold] {budget.explanation}", highlight=False)
    if budget.mfu is not None:
        c.print(f"[bold]MFU:[/bold] {budget.mfu:.3g} from {budget.mfu_source}", highlight=False)
    if len(budget.constraints) > 1:
        allowed = ", ".join(f"{k} {v:.3g}" for k, v in budget.constraints.items())
        c.print(f"[bold]FLOPs each budget allows:[/bold] {allowed}", highlight=False)
    spends = spend_text(budget)
    if spends:
        c.print("[bold]Spends:[/bold] " + spends, highlight=False)


def print_recommendation(c, rec, arch) -> None:
    """The recommended (N, D), the range of the other laws, and the proposed architecture."""
    from rich.table import Table

    from trainplan.scaling.recommendation import short_id

    r = rec.recommended
    rows = [("law", f"{r.law} ({r.label})"), ("why", rec.why), ("N (params)", num(r.n_params)),
            ("D (tokens)", num(r.tokens)), ("tokens/param", f"{r.tokens_per_param:.1f}"),
            ("loss", "-" if r.loss is None else f"{r.loss:.4f} (this law's units)")]
    c.print(kv_table("Recommended", rows))
    text = range_text(rec)
    if text is not None:
        head, rest = text.split(":", 1)
        c.print(f"[bold]{head}:[/bold]{rest}", highlight=False)
    for line in excluded_texts(rec):
        c.print(line, style="dim")
    t = Table(title="Every law (detail)", title_justify="left")
    for col in ("id", "N", "D", "D/N", "loss"):
        t.add_column(col, no_wrap=True)
    for a in [rec.recommended, *rec.others]:
        mark = "*" if a is rec.recommended else ""
        t.add_row(short_id(a.law) + mark, num(a.n_params), num(a.tokens), f"{a.tokens_per_param:.1f}",
                  "-" if a.loss is None else f"{a.loss:.4f}")
    c.print(t)
    c.print("* recommended. " + "; ".join(f"{short_id(a.law)} = {a.law}" for a in [rec.recommended, *rec.others]),
            style="dim", highlight=False)
    if arch is not None:
        c.print(kv_table("Proposed architecture (Llama-3 shapes)", architecture_rows(arch, r.n_params)))
        c.print(ARCH_SHAPES, style="dim", highlight=False)


def print_budget(c, budget) -> None:
    """The budget line, the MFU behind it and the binding constraint (:mod:`.recommendation`)."""
    print_budget_block(c, budget)


def print_advice(budget, title: str, rows: list[tuple[str, str, str]], notes, warning: str | None) -> None:
    """Budget line, a (quantity, value, source) table, the notes, and a warning if any."""
    from rich.table import Table

    c = console()
    print_budget(c, budget)
    t = Table(title=title)
    for col in ("quantity", "value", "source"):
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*row)
    c.print(t)
    for note in notes:
        c.print(f"- {note}", style="dim")
    if warning:
        c.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)


def _ratio(e: float, decimals: int = 2) -> str:
    """A ratio (epochs, tokens per parameter) to ``decimals`` decimals, or three significant
    figures when large."""
    return f"{e:.{decimals}f}" if e < 1e4 else f"{e:.3g}"


def print_repeated(c, r: dict) -> None:
    """The data-constrained optimum (a ``DataConstrainedResult.to_dict()``) against the unconstrained one."""
    from rich.table import Table

    t = Table(title=f"Repeated data (Muennighoff et al. 2023): {num(r['unique_tokens'])} unique tokens")
    for col in ("", "N", "D (seen)", "epochs", "eff. D'", "loss"):
        t.add_column(col, no_wrap=True)
    t.add_row("unconstrained optimum", num(r["unconstrained_n_params"]), num(r["unconstrained_tokens"]),
              _ratio(r['unconstrained_tokens'] / r['unique_tokens']), "-", f"{r['unconstrained_loss']:.4f}")
    t.add_row("best with this data", num(r["n_params"]), num(r["tokens"]), _ratio(r['epochs']),
              num(r["effective_tokens"]), f"{r['loss']:.4f}")
    p = r.get("planned")
    if p:
        t.add_row(f"your plan: {p['epochs']:g} epochs", num(p["n_params"]), num(p["tokens"]), _ratio(p['epochs']),
                  num(p["effective_tokens"]), f"{p['loss']:.4f}")
    c.print(t)
    if p:
        c.print(f"{p['epochs']:g} epochs over {num(p['unique_tokens'])} unique tokens: a {num(p['n_params'])} model "
                f"on {num(p['tokens'])} tokens ({num(p['effective_tokens'])} effective, {p['value_vs_fresh']:.1%} "
                f"of fresh); loss {p['loss_vs_best']:+.4f} against the best with this data.", highlight=False)
    c.print("data is the limit" if r["data_limited"] else "data is not the limit at this budget", style="dim")


def print_inference(c, r: dict) -> None:
    """Compute-optimal against lifetime-optimal model (an ``InferenceAwareResult.to_dict()``)."""
    from rich.table import Table

    t = Table(title=f"Inference-aware sizing (Sardana & Frankle 2023): {num(r['inference_tokens'])} inference tokens, "
                    f"target loss {r['target_loss']:.4f} ({r['law']})")
    for col in ("", "N", "D (train)", "tokens/param", "train FLOPs", "total FLOPs"):
        t.add_column(col)
    t.add_row("compute-optimal", num(r["chinchilla_n_params"]), num(r["chinchilla_tokens"]),
              _ratio(r['chinchilla_tokens_per_param'], 1), f"{r['chinchilla_train_flops']:.3g}",
              f"{r['chinchilla_total_flops']:.3g}")
    t.add_row("lifetime-optimal", num(r["n_params"]), num(r["tokens"]), _ratio(r['tokens_per_param'], 1),
              f"{r['train_flops']:.3g}", f"{r['total_flops']:.3g}")
    c.print(t)
    c.print(f"saves {r['flops_saved']:.3g} FLOPs ({r['fraction_saved']:.1%}) over the model's life "
            "(training 6ND + inference 2N per token).")
    for w in r.get("warnings", ()):
        c.print(f"warning: {w}", style="yellow", highlight=False)
