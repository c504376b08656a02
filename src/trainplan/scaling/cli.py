"""``trainplan scale``: budget -> (N, D) under each law, fitting your own law, and beyond.

Mounted by the main CLI with ``app.add_typer(scale_app, name="scale")``. numpy and the scaling
modules are imported inside the commands so that mounting stays light; scipy only where a command
optimises (repeated data, inference-aware sizing, fitting) and matplotlib only for ``--plot``.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer

from trainplan.errors import InputError, MissingExtraError, require_positive

scale_app = typer.Typer(
    name="scale",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode="rich",
    help="Scaling laws: compute-optimal parameters and tokens for a budget, under each named law "
         "(Kaplan 2020, Hoffmann 2022 approaches 1-3, Epoch 2024, your own fit).",
)


# --------------------------------------------------------------------------------------------
# Helpers


@contextmanager
def _handled() -> Iterator[None]:
    """Bad input: red message on stderr, exit status 2, no traceback."""
    try:
        yield
    except (InputError, MissingExtraError) as exc:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True).print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None


def _console():
    from rich.console import Console

    return Console()


def _si(x: float | None, unit: str = "") -> str:
    """1.5e12 -> '1.50T'; None -> '-'."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}{unit}"
    return f"{x:.3g}{unit}"


def _band(ci: Any) -> str:
    return "-" if not ci else f"[{_si(ci[0])}, {_si(ci[1])}]"


def _print_json(payload: Any) -> None:
    typer.echo(json.dumps(payload, indent=2, default=_json_default))


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _laws(names: Optional[List[str]], law_file: Optional[Path]) -> list:
    from trainplan.scaling.law_file import load_law
    from trainplan.scaling.laws import NAMED_LAWS, get_law

    laws = [get_law(n) for n in names] if names else list(NAMED_LAWS.values())
    if law_file is not None:
        laws.append(load_law(law_file))
    return laws


_JSON = typer.Option(False, "--json", help="print machine-readable JSON")


def _budget_option(flag: str, help: str) -> Any:
    return typer.Option(None, flag, help=help, rich_help_panel="Budget")


#: The budget options every ``trainplan scale`` command takes: parameter name -> (type, typer option).
_BUDGET_OPTIONS: dict[str, tuple[Any, Any]] = {
    "flops": (Optional[float], _budget_option("--flops", "training compute in FLOPs, e.g. 1e23")),
    "gpu_hours": (Optional[float], _budget_option("--gpu-hours", "GPU-hours on --gpu")),
    "dollars": (Optional[float], _budget_option(
        "--dollars", "US dollars on --gpu (catalog price or --usd-per-gpu-hour)")),
    "deadline_days": (Optional[float], _budget_option("--deadline-days", "wall-clock days on --gpus x --gpu")),
    "gpu": (Optional[str], _budget_option("--gpu", "accelerator id or alias, e.g. h100_sxm (see `trainplan gpus`)")),
    "gpus": (Optional[int], _budget_option("--gpus", "GPUs in the cluster (needed with --deadline-days)")),
    "usd_per_gpu_hour": (Optional[float], _budget_option("--usd-per-gpu-hour", "price override for --dollars")),
    "mfu": (Optional[float], _budget_option(
        "--mfu", "model FLOPs utilisation override (default: cost model, else 0.40)")),
}
_BUDGET_KINDS = "--flops, --gpu-hours, --dollars, --deadline-days"


@dataclass(frozen=True)
class BudgetOptions:
    """The values of the budget options, as a command decorated with :func:`_with_budget` receives them."""

    flops: Optional[float] = None
    gpu_hours: Optional[float] = None
    dollars: Optional[float] = None
    deadline_days: Optional[float] = None
    gpu: Optional[str] = None
    gpus: Optional[int] = None
    usd_per_gpu_hour: Optional[float] = None
    mfu: Optional[float] = None

    @property
    def given(self) -> bool:
        """Whether a budget was given (any of --flops, --gpu-hours, --dollars, --deadline-days)."""
        return any(v is not None for v in (self.flops, self.gpu_hours, self.dollars, self.deadline_days))

    def resolve(self, alternative: str | None = None):
        """The :class:`~trainplan.scaling.budget.BudgetResult`; InputError when no budget was given.

        ``alternative`` names what the command accepts instead of a budget (for the message).
        """
        if not self.given:
            expected = f"{alternative}, or a budget ({_BUDGET_KINDS})" if alternative else f"one of {_BUDGET_KINDS}"
            raise InputError("budget", "none", expected, hint="e.g. --flops 1e23; see --help")
        from trainplan.scaling.budget import flops_from_budget

        return flops_from_budget(**asdict(self))


def _with_budget(command):
    """Add the budget options to ``command``, which receives them as one ``budget_opts: BudgetOptions``.

    ``--help`` lists them in a panel of their own, "Budget".
    """
    sig = inspect.signature(command, eval_str=True)
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values() if p.name != "budget_opts"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
             for name, (annotation, option) in _BUDGET_OPTIONS.items()]
    params = own + added

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        budget = BudgetOptions(**{name: kwargs.pop(name) for name in _BUDGET_OPTIONS})
        return command(budget_opts=budget, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def _print_budget(console, budget) -> None:
    console.print(f"[bold]Budget:[/bold] {budget.explanation}", highlight=False)


def _print_advice(budget, title: str, rows: list[tuple[str, str, str]], notes, warning: str | None) -> None:
    """Budget line, a (quantity, value, source) table, the notes, and a warning if any."""
    from rich.table import Table

    c = _console()
    _print_budget(c, budget)
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


# --------------------------------------------------------------------------------------------
# trainplan scale  (no subcommand): budget -> (N, D) under each law


@scale_app.callback()
@_with_budget
def scale(
    ctx: typer.Context,
    law: Optional[List[str]] = typer.Option(None, "--law", help="only these laws (repeatable); default: all named laws"),
    law_file: Optional[Path] = typer.Option(None, "--law-file", help="a law fitted with `trainplan scale fit --out`"),
    unique_tokens: Optional[float] = typer.Option(None, "--unique-tokens", help="unique tokens available (repeated-data analysis)"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="planned epochs over --unique-tokens"),
    inference_tokens: Optional[float] = typer.Option(None, "--inference-tokens", help="tokens the model will serve (inference-aware sizing)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write the isoFLOP plot (needs the plots extra)"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = _JSON,
) -> None:
    """Compute-optimal parameters N and tokens D for a budget under each named law."""
    if ctx.invoked_subcommand is not None:
        return
    with _handled():
        budget = budget_opts.resolve()
        import trainplan.scaling.allocate as al

        laws = _laws(law, law_file)
        rows = [al.optimal_allocation(budget.flops, lw) for lw in laws]
        grid = _common_isoflop_grid(rows)
        table_curves = {}
        for lw in laws:
            cur = al.isoflop_curve(budget.flops, lw, n_params=grid)
            if cur is not None:
                table_curves[lw.name] = cur
        repeated = None
        if epochs is not None:
            require_positive("epochs", epochs)
        if unique_tokens is not None:
            repeated = al.data_constrained_optimum(budget.flops, unique_tokens).to_dict()
            if epochs is not None:
                repeated["planned_epochs"] = epochs
                repeated["planned_effective_tokens"] = float(al.effective_data(unique_tokens, epochs))
        elif epochs is not None:
            raise InputError("epochs", epochs, "used together with --unique-tokens")
        inference = None
        if inference_tokens is not None:
            inference = al.inference_aware(inference_tokens, flops=budget.flops).to_dict()
        plot_path = None
        if plot is not None:
            from trainplan.scaling.plots import plot_isoflop

            curves = [c for c in (al.isoflop_curve(budget.flops, lw) for lw in laws) if c is not None]
            plot_path = plot_isoflop(curves, rows, plot)

        if as_json:
            _print_json({
                "budget": budget.to_dict(),
                "allocations": [r.to_dict() for r in rows],
                "isoflop": {k: v.to_dict() for k, v in table_curves.items()},
                "repeated_data": repeated,
                "inference_aware": inference,
                "plot": str(plot_path) if plot_path else None,
            })
            return
        _print_allocation_tables(budget, rows, table_curves, grid, repeated, inference, plot_path)


def _common_isoflop_grid(rows) -> list[float]:
    import numpy as np

    ns = [r.n_params for r in rows]
    return list(np.geomspace(min(ns) / 4, max(ns) * 4, 11))


def _print_allocation_tables(budget, rows, curves, grid, repeated, inference, plot_path) -> None:
    from rich.table import Table

    c = _console()
    _print_budget(c, budget)
    t = Table(title=f"Compute-optimal allocation for C = {budget.flops:.3g} FLOPs")
    for col in ("law", "name", "N (params)", "D (tokens)", "tokens/param", "loss"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r.label, r.law, _si(r.n_params), _si(r.tokens), f"{r.tokens_per_param:.1f}",
                  "-" if r.loss is None else f"{r.loss:.4f}")
    c.print(t)
    conventions: dict[str, list[str]] = {}
    for r in rows:
        conventions.setdefault(r.convention, []).append(r.law)
    for conv, names in conventions.items():
        c.print(f"{', '.join(names)}: {conv}", style="dim", highlight=False)
    if any(r.law == "kaplan2020" for r in rows):
        from trainplan.scaling.laws import PF_DAY_FLOPS

        c.print(f"In Kaplan's units this budget is C = {budget.flops / PF_DAY_FLOPS:.4g} PF-days.", style="dim")
    c.print("Losses are in each law's own units (Kaplan: WebText2; Hoffmann/Epoch: MassiveText) and are "
            "comparable only within a law. Kaplan's N excludes embeddings.", style="dim")
    if curves:
        it = Table(title="IsoFLOP curve: loss against N at fixed C (D = C/6N)")
        it.add_column("N")
        it.add_column("D")
        for name in curves:
            it.add_column(name)
        import numpy as np

        from trainplan.scaling.laws import tokens_for_compute

        best = {name: int(np.argmin(cur.loss)) for name, cur in curves.items()}
        for i, n in enumerate(grid):
            losses = [f"{cur.loss[i]:.4f}{' *' if i == best[name] else ''}" for name, cur in curves.items()]
            it.add_row(_si(n), _si(float(tokens_for_compute(budget.flops, n))), *losses)
        c.print(it)
        c.print("* = lowest loss on this grid", style="dim")
    if repeated:
        _print_repeated(c, repeated)
    if inference:
        _print_inference(c, inference)
    if plot_path:
        c.print(f"plot written to {plot_path}")


def _print_repeated(c, r: dict) -> None:
    from rich.table import Table

    t = Table(title=f"Repeated data (Muennighoff et al. 2023): {_si(r['unique_tokens'])} unique tokens")
    for col in ("", "N", "D (seen)", "epochs", "effective D'", "loss"):
        t.add_column(col)
    t.add_row("unconstrained optimum", _si(r["unconstrained_n_params"]), _si(r["unconstrained_tokens"]),
              f"{r['unconstrained_tokens'] / r['unique_tokens']:.2f}", "-", f"{r['unconstrained_loss']:.4f}")
    t.add_row("best with this data", _si(r["n_params"]), _si(r["tokens"]), f"{r['epochs']:.2f}",
              _si(r["effective_tokens"]), f"{r['loss']:.4f}")
    c.print(t)
    if "planned_epochs" in r:
        e = r["planned_epochs"]
        c.print(f"{e:g} epochs over {_si(r['unique_tokens'])} unique tokens = "
                f"{_si(r['planned_effective_tokens'])} effective tokens "
                f"({r['planned_effective_tokens'] / (e * r['unique_tokens']):.1%} of {_si(e * r['unique_tokens'])} fresh).")
    c.print("data is the limit" if r["data_limited"] else "data is not the limit at this budget", style="dim")


def _print_inference(c, r: dict) -> None:
    from rich.table import Table

    t = Table(title=f"Inference-aware sizing (Sardana & Frankle 2023): {_si(r['inference_tokens'])} inference tokens, "
                    f"target loss {r['target_loss']:.4f} ({r['law']})")
    for col in ("", "N", "D (train)", "tokens/param", "train FLOPs", "total FLOPs"):
        t.add_column(col)
    t.add_row("compute-optimal", _si(r["chinchilla_n_params"]), _si(r["chinchilla_tokens"]),
              f"{r['chinchilla_tokens_per_param']:.1f}", f"{r['chinchilla_train_flops']:.3g}",
              f"{r['chinchilla_total_flops']:.3g}")
    t.add_row("lifetime-optimal", _si(r["n_params"]), _si(r["tokens"]), f"{r['tokens_per_param']:.1f}",
              f"{r['train_flops']:.3g}", f"{r['total_flops']:.3g}")
    c.print(t)
    c.print(f"saves {r['flops_saved']:.3g} FLOPs ({r['fraction_saved']:.1%}) over the model's life "
            "(training 6ND + inference 2N per token).")


# --------------------------------------------------------------------------------------------
# trainplan scale fit


@scale_app.command("fit")
def fit_command(
    runs_csv: Path = typer.Argument(..., help="CSV with columns N, D (or C), loss; '#' lines are comments"),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="bootstrap resamples for the intervals (0: none)"),
    budget_flops: Optional[float] = typer.Option(None, "--budget-flops", help="also give the optimal allocation for this budget"),
    out: Optional[Path] = typer.Option(None, "--out", help="save the fitted law as JSON (for --law-file)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="plot fit and residuals (needs the plots extra)"),
    ci_level: float = typer.Option(0.95, "--ci", help="confidence level of the intervals"),
    seed: int = typer.Option(0, "--seed", help="random seed of the bootstrap"),
    drop_highest: int = typer.Option(0, "--drop-highest", help="drop this many highest-loss runs first"),
    name: str = typer.Option("fitted", "--name", help="name of the fitted law"),
    as_json: bool = _JSON,
) -> None:
    """Fit L = E + A/N^alpha + B/D^beta (Huber 1e-3 on log-loss, L-BFGS from a grid) with bootstrap intervals."""
    with _handled():
        from trainplan.scaling.fit import fit_law
        from trainplan.scaling.law_file import save_law
        from trainplan.scaling.runs import MIN_RUNS, load_runs

        if drop_highest < 0:
            raise InputError("drop-highest", drop_highest, "an integer >= 0")
        runs = load_runs(runs_csv)
        if drop_highest:
            if len(runs) - drop_highest < MIN_RUNS:
                raise InputError("drop-highest", drop_highest, f"leaving at least {MIN_RUNS} runs")
            runs = runs.without_highest_loss(drop_highest)
        result = fit_law(runs, n_bootstrap=bootstrap, ci_level=ci_level, seed=seed, name=name,
                         label=f"fitted to {runs_csv.name} ({len(runs)} runs)")
        band = None
        if budget_flops is not None:
            require_positive("budget-flops", budget_flops)
            band = result.allocation(budget_flops)
        saved = save_law(result, out) if out is not None else None
        plotted = None
        if plot is not None:
            from trainplan.scaling.plots import plot_fit

            plotted = plot_fit(result, plot)
        if as_json:
            payload = result.to_dict()
            payload["allocation"] = band.to_dict() if band else None
            payload["law_file"] = str(saved) if saved else None
            payload["plot"] = str(plotted) if plotted else None
            _print_json(payload)
            return
        _print_fit(result, band, saved, plotted)


def _print_fit(result, band, saved, plotted) -> None:
    from rich.table import Table

    c = _console()
    d = result.to_dict()
    ci = d["ci"]
    lvl = f"{result.ci_level:.0%}" if result.bootstrap is not None else ""
    t = Table(title=f"Fitted L(N, D) = E + A/N^alpha + B/D^beta  ({d['n_runs']} runs, "
                    f"{d['n_bootstrap']} bootstrap resamples)")
    t.add_column("parameter")
    t.add_column("estimate")
    t.add_column(f"{lvl} interval" if lvl else "interval")
    for k, v in d["params"].items():
        lo_hi = ci.get(k)
        fmt = (lambda x: f"{x:.4g}")
        t.add_row(k, fmt(v), f"[{fmt(lo_hi[0])}, {fmt(lo_hi[1])}]" if lo_hi else "-")
    t.add_row("a = beta/(alpha+beta)", f"{result.law.a:.4f}",
              f"[{ci['a'][0]:.4f}, {ci['a'][1]:.4f}]" if "a" in ci else "-")
    c.print(t)
    c.print(f"rms log-residual {d['rms_log_residual']:.4f}; Huber delta {d['huber_delta']:g}; "
            f"objective (sum) {d['objective']:.6g}; L-BFGS starts {d['n_starts']}", style="dim")
    if band is not None:
        bt = Table(title=f"Compute-optimal allocation for C = {band.flops:.3g} FLOPs")
        for col in ("", "estimate", f"{lvl} band" if lvl else "band"):
            bt.add_column(col)
        bt.add_row("N (params)", _si(band.n_params), _band(band.n_params_ci))
        bt.add_row("D (tokens)", _si(band.tokens), _band(band.tokens_ci))
        bt.add_row("tokens/param", f"{band.tokens / band.n_params:.1f}",
                   "-" if not band.n_params_ci else "")
        bt.add_row("loss", f"{band.loss:.4f}",
                   "-" if not band.loss_ci else f"[{band.loss_ci[0]:.4f}, {band.loss_ci[1]:.4f}]")
        c.print(bt)
    if saved:
        c.print(f"law saved to {saved} (use: trainplan scale --law-file {saved})")
    if plotted:
        c.print(f"plot written to {plotted}")


# --------------------------------------------------------------------------------------------
# trainplan scale repeat / inference / batch / multimodal


@scale_app.command("repeat")
@_with_budget
def repeat_command(
    unique_tokens: float = typer.Option(..., "--unique-tokens", help="unique tokens available"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="planned passes over the unique tokens"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = _JSON,
) -> None:
    """Repeated data (Muennighoff et al. 2023): effective data of E epochs, best allocation when data is the limit."""
    with _handled():
        import trainplan.scaling.allocate as al

        require_positive("unique-tokens", unique_tokens)
        out: dict[str, Any] = {"unique_tokens": unique_tokens}
        if epochs is not None:
            require_positive("epochs", epochs)
            eff = float(al.effective_data(unique_tokens, epochs))
            out.update(epochs=epochs, tokens_seen=unique_tokens * epochs, effective_tokens=eff,
                       value_vs_fresh=eff / (unique_tokens * epochs))
        budget = budget_opts.resolve("--epochs") if budget_opts.given or epochs is None else None
        if budget is not None:
            out["budget"] = budget.to_dict()
            out["allocation"] = al.data_constrained_optimum(budget.flops, unique_tokens).to_dict()
        if as_json:
            _print_json(out)
            return
        c = _console()
        if epochs is not None:
            c.print(f"{epochs:g} epochs over {_si(unique_tokens)} unique tokens = {_si(out['effective_tokens'])} "
                    f"effective tokens, worth {out['value_vs_fresh']:.1%} of {_si(out['tokens_seen'])} fresh tokens "
                    f"(D' = U + U R*(1 - exp(-R/R*)), R* = {al.R_D_STAR:.4g}; Muennighoff et al. 2023).")
        if budget is not None:
            _print_budget(c, budget)
            _print_repeated(c, out["allocation"])


@scale_app.command("inference")
@_with_budget
def inference_command(
    inference_tokens: float = typer.Option(..., "--inference-tokens", help="tokens the model will serve over its life"),
    target_loss: Optional[float] = typer.Option(None, "--target-loss", help="quality target instead of a budget"),
    law: str = typer.Option("epoch2024", "--law", help="parametric law (epoch2024, hoffmann2022-a3, ...)"),
    law_file: Optional[Path] = typer.Option(None, "--law-file", help="use a fitted law instead"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = _JSON,
) -> None:
    """Inference-aware sizing (Sardana & Frankle 2023): the smaller, longer-trained model of least lifetime cost."""
    with _handled():
        import trainplan.scaling.allocate as al
        from trainplan.scaling.law_file import load_law

        lw = load_law(law_file) if law_file is not None else law
        budget = None
        if target_loss is None:
            budget = budget_opts.resolve("--target-loss")
            r = al.inference_aware(inference_tokens, flops=budget.flops, law=lw)
        else:
            r = al.inference_aware(inference_tokens, target_loss=target_loss, law=lw)
        if as_json:
            _print_json({"budget": budget.to_dict() if budget else None, **r.to_dict()})
            return
        c = _console()
        if budget:
            _print_budget(c, budget)
        _print_inference(c, r.to_dict())


@scale_app.command("batch")
@_with_budget
def batch_command(
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="sequence length, to express batches in sequences"),
    loss: Optional[float] = typer.Option(None, "--loss", help="loss (nats) for Kaplan's critical batch"),
    batch: Optional[int] = typer.Option(None, "--batch", help="your global batch in sequences (for the GAS heuristic)"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = _JSON,
) -> None:
    """Batch size and learning rate: DeepSeek LLM fits, Kaplan's critical batch, the labelled GAS heuristic."""
    with _handled():
        import trainplan.scaling.allocate as al

        budget = budget_opts.resolve()
        adv = al.batch_advice(budget.flops, seq_len=seq_len, loss=loss, global_batch=batch)
        if as_json:
            _print_json({"budget": budget.to_dict(), **adv.to_dict()})
            return
        seqs = f" = {adv.deepseek_batch_sequences:,.0f} sequences of {seq_len}" if adv.deepseek_batch_sequences else ""
        rows = [
            ("optimal batch B_opt", f"{_si(adv.deepseek_batch_tokens)} tokens{seqs}",
             "DeepSeek LLM 2024: {:.4f} C^{:.4f}".format(*al.DEEPSEEK_BATCH)),
            ("optimal peak learning rate", f"{adv.deepseek_learning_rate:.3g}",
             "DeepSeek LLM 2024: {:.4f} C^{:.4f}".format(*al.DEEPSEEK_LR)),
            ("critical batch B_crit", f"{_si(adv.kaplan_critical_batch_tokens)} tokens at loss "
             f"{adv.loss_for_critical_batch:.3f} ({adv.loss_source})",
             f"Kaplan et al. 2020 eq. 1.4: {al.KAPLAN_B_STAR:.0e} / L^(1/{al.KAPLAN_ALPHA_B})"),
        ]
        if adv.gas_heuristic is not None:
            rows.append(("GAS (HEURISTIC)", f"{adv.gas_heuristic} for batch {adv.global_batch}",
                         "source document: ceil(sqrt(batch/4)); no published basis"))
        _print_advice(budget, "Batch size and learning rate", rows, adv.notes, adv.gas_heuristic_warning)


@scale_app.command("multimodal")
@_with_budget
def multimodal_command(
    fusion: str = typer.Option("early", "--fusion", help="early or late fusion (Shukor et al. 2025)"),
    padding: float = typer.Option(0.0, "--padding", help="fraction of processed tokens that are padding"),
    gamma: Optional[float] = typer.Option(None, "--gamma", help="show the source document's heuristic with this gamma"),
    ref_flops: Optional[float] = typer.Option(None, "--ref-flops", help="FLOPs of your own reference optimum"),
    ref_params: Optional[float] = typer.Option(None, "--ref-params", help="N of your reference optimum"),
    ref_tokens: Optional[float] = typer.Option(None, "--ref-tokens", help="D of your reference optimum"),
    law: str = typer.Option("epoch2024", "--law", help="text law for the base allocation"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = _JSON,
) -> None:
    """Multimodal sizing: Shukor et al. 2025 exponents, padding as lost tokens, the labelled heuristic."""
    with _handled():
        import trainplan.scaling.allocate as al

        budget = budget_opts.resolve()
        adv = al.multimodal_advice(budget.flops, fusion=fusion, padding=padding, gamma=gamma, ref_flops=ref_flops,
                                   ref_n_params=ref_params, ref_tokens=ref_tokens, law=law)
        if as_json:
            _print_json({"budget": budget.to_dict(), **adv.to_dict()})
            return
        rows = [
            ("N_opt exponent / D_opt exponent", f"{adv.n_exponent} / {adv.d_exponent}",
             "Shukor et al. 2025 (arXiv:2504.07951)"),
            ("10x compute multiplies", f"N by {10 ** adv.n_exponent:.2f}, D by {10 ** adv.d_exponent:.2f}",
             "from the exponents"),
            (f"base N, D ({adv.base_law})", f"{_si(adv.base_n_params)}, {_si(adv.base_tokens)}", "text law"),
        ]
        if adv.scaled_n_params is not None:
            rows.append(("your reference scaled to this budget", f"{_si(adv.scaled_n_params)}, {_si(adv.scaled_tokens)}",
                         "reference x (C/C_ref)^exponent"))
        rows += [
            (f"tokens to process at {adv.padding:.0%} padding", _si(adv.tokens_to_process),
             "D / (1 - padding): padding is lost effective tokens"),
            ("compute spent on padding", f"{adv.padding_flops:.3g} FLOPs", "6 N x padding tokens"),
        ]
        if adv.heuristic_n_params is not None:
            rows.append((f"HEURISTIC N' (gamma {adv.heuristic_gamma:g})", _si(adv.heuristic_n_params),
                         "source document; no published basis"))
        _print_advice(budget, f"Multimodal sizing ({fusion} fusion)", rows, adv.notes, adv.heuristic_warning)
