"""Plots for ``trainplan scale`` (needs the ``plots`` extra; matplotlib is imported here only)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Sequence

from trainplan.errors import InputError, MissingExtraError
from trainplan.scaling._io import check_target, write_atomic


def pyplot(purpose: str = "Plotting"):
    """matplotlib's pyplot on the Agg backend, imported lazily (the ``plots`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError("matplotlib", "plots", purpose) from None
    return plt


def literal(text: Any) -> str:
    """``text`` drawn as it is: matplotlib reads a string with two ``$`` as mathtext (a law or
    GPU name such as ``$\\frac{$`` fails to parse when the figure is drawn), so each ``$`` is
    escaped (matplotlib's "Writing mathematical expressions": ``\\$`` is a literal dollar)."""
    return str(text).replace("$", r"\$")


def _save_atomic(fig: Any, path: str | os.PathLike[str], force: bool = False) -> Path:
    """Render a figure in the format its file name ends in, then write it atomically."""
    check_target(path, "plot path", force)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=Path(path).suffix.lstrip(".").lower() or "png", dpi=120, bbox_inches="tight")
    except ValueError as exc:
        raise InputError("plot path", str(path), "a file ending in .png, .pdf or .svg", hint=str(exc)) from None
    return write_atomic(path, buf.getvalue(), "plot path", force)


def plot_isoflop(curves: Sequence[Any], allocations: Sequence[Any], path: str | os.PathLike[str],
                 force: bool = False) -> Path:
    """Loss against N at fixed C for each law with a loss; every law's N_opt marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    by_law = {a.law: a for a in allocations}
    for cur in curves:
        (line,) = ax.plot(cur.n_params, cur.loss, label=literal(cur.law))
        a = by_law.get(cur.law)
        if a is not None and a.loss is not None:
            ax.plot([a.n_params], [a.loss], "o", color=line.get_color())
    lo, hi = ax.get_ylim() if curves else (0, 1)
    for a in allocations:
        if a.loss is None:
            ax.axvline(a.n_params, ls="--", lw=1, color="grey")
            ax.text(a.n_params, hi, " " + literal(a.law), rotation=90, va="top", fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("parameters N (Kaplan: non-embedding)")
    ax.set_ylabel("predicted loss (nats/token, each law's own data)")
    flops = allocations[0].flops if allocations else float("nan")
    ax.set_title(f"IsoFLOP curves at C = {flops:.3g} FLOPs (dots: each law's optimum)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    try:
        return _save_atomic(fig, path, force)
    finally:
        plt.close(fig)


def plot_fit(result: Any, path: str | os.PathLike[str], force: bool = False) -> Path:
    """Observed vs fitted loss for each run, isoFLOP curves of the fit, and log residuals."""
    import numpy as np

    from trainplan.scaling.laws import tokens_for_compute, training_flops

    plt = pyplot()
    runs = result.runs
    law = result.law
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    flops = training_flops(runs.n_params, runs.tokens)
    sc = ax1.scatter(runs.n_params, runs.loss, c=np.log10(flops), s=14, cmap="viridis", label="runs")
    fig.colorbar(sc, ax=ax1, label="log10 C (FLOPs)")
    for c in np.geomspace(flops.min(), flops.max(), 5):
        n = np.geomspace(runs.n_params.min() / 2, runs.n_params.max() * 2, 200)
        ax1.plot(n, law.loss(n, tokens_for_compute(c, n)), lw=1, color=sc.cmap(sc.norm(np.log10(c))))
    n_opt, d_opt = law.optimal(np.geomspace(flops.min(), flops.max(), 50))
    ax1.plot(n_opt, law.loss(n_opt, d_opt), "k--", lw=1, label="compute-optimal frontier")
    ax1.set_xscale("log")
    ax1.set_xlabel("parameters N")
    ax1.set_ylabel("loss")
    p = law.params()
    ax1.set_title(f"E={p['E']:.3g} A={p['A']:.3g} B={p['B']:.3g} alpha={p['alpha']:.3f} beta={p['beta']:.3f}")
    ax1.legend(fontsize=8)
    ax2.scatter(runs.n_params, result.residuals, s=12)
    ax2.axhline(0, color="k", lw=1)
    ax2.set_xscale("log")
    ax2.set_xlabel("parameters N")
    ax2.set_ylabel("log L_fit - log L_run")
    ax2.set_title(f"residuals (rms {np.sqrt(np.mean(result.residuals ** 2)):.4f})")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
    try:
        return _save_atomic(fig, path, force)
    finally:
        plt.close(fig)
