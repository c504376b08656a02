"""``trainplan plan``: search every parallel layout, rank them, explain the winner, emit files.

Module import stays light (typer only); numpy, rich and the search load inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o


def plan_command(
    job_file: Optional[Path] = o.JOB_FILE,
    model: Optional[str] = o.MODEL,
    gpu: Optional[list[str]] = typer.Option(None, "--gpu", help="GPU type(s): repeat or comma list"),
    gpu_file: Optional[Path] = o.GPU_FILE,
    gpus: Optional[str] = typer.Option(None, "--gpus", help='GPU count "64", list "64,128" or range "8..4096" (powers of two and node multiples '
                                           'of them; whole nodes in between for --objective fewest)'),
    gpus_per_node: Optional[int] = o.GPUS_PER_NODE,
    inter_node_gbps: Optional[float] = o.INTER_NODE_GBPS,
    intra_node_gbps: Optional[float] = o.INTRA_NODE_GBPS,
    price: Optional[str] = typer.Option(
        None, "--price", help="USD per GPU-hour: one price for every GPU type (2.5), or per type "
                              "(l40s=0.9,h100=2.5; the others keep the catalog's)"),
    objective: Optional[str] = typer.Option(None, "--objective", help="fastest | cheapest | fewest"),
    deadline_days: Optional[float] = typer.Option(None, "--deadline-days", help="wall-clock limit"),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="cost limit"),
    headroom_gib: Optional[float] = typer.Option(None, "--headroom-gib", help="GiB per GPU to keep free"),
    top: Optional[int] = typer.Option(None, "--top", help="layouts to show (default 5)"),
    quantile: Optional[float] = typer.Option(
        None, "--quantile", help="rank by this quantile of wall-clock (fastest) or cost "
                                 "(cheapest) instead of the point: 0.8 ranks by P80 (one-sided "
                                 "split conformal bound over the validation runs, docs/intervals.md)"),
    coverage: Optional[float] = typer.Option(
        None, "--coverage", help="nominal coverage of the prediction intervals shown (default 0.8)"),
    uneven_stages: Optional[bool] = typer.Option(None, "--uneven-stages/--even-stages",
                                                 help="allow PP sizes that do not divide the layers"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    emit: Optional[list[str]] = o.EMIT,
    out: Optional[Path] = o.OUT,
    force: bool = o.FORCE,
    seq_len: Optional[int] = o.SEQ_LEN,
    global_batch: Optional[int] = o.GLOBAL_BATCH,
    tokens: Optional[float] = o.TOKENS,
    samples: Optional[float] = o.SAMPLES,
    epochs: Optional[float] = o.EPOCHS,
    images_per_sample: Optional[float] = o.IMAGES_PER_SAMPLE,
    image_size: Optional[str] = o.IMAGE_SIZE,
    text_tokens: Optional[float] = o.TEXT_TOKENS,
    document_tokens: Optional[float] = o.DOCUMENT_TOKENS,
    adamw_impl: Optional[str] = o.ADAMW_IMPL,
    precision: Optional[str] = o.PRECISION,
    optimizer: Optional[str] = o.OPTIMIZER,
    profile: Optional[Path] = o.PROFILE,
    lora: Optional[bool] = o.LORA,
    lora_rank: Optional[int] = o.LORA_RANK,
    base_weights: Optional[str] = o.BASE_WEIGHTS_FLAG,
    lora_targets: Optional[str] = o.LORA_TARGETS,
    double_quant: Optional[bool] = o.DOUBLE_QUANT,
    frozen: Optional[list[str]] = o.FROZEN,
    train_in_full: Optional[list[str]] = o.TRAIN_IN_FULL,
    framework: Optional[str] = typer.Option(
        None, "--framework", help="training framework (megatron, torchtitan, fsdp, llm-foundry, "
                                  "deepspeed, pytorch): only layouts it can run are searched"),
    report: Optional[Path] = o.path_option(
        None, "--report", help="write a report: FILE.html or FILE.md; inside the --emit folder "
                               "(--out) it is written with the launch files as one set, "
                               "elsewhere after them"),
) -> None:
    """Plan the layout: search TP/PP/VP/CP/EP/DP, ZeRO, micro-batch, recompute and offload on
    one or more GPU types and counts; rank by the objective; show the Pareto front of time
    against cost; optionally write launch files for the winner."""
    from trainplan.report.progress import DelayedBar
    from trainplan.services.jobfile import drop_strategy, merge, start
    from trainplan.services.plan import emit_winner, plan_request, run_plan

    if report is not None:              # a bad --report path fails before the search
        from trainplan.report.output import check_report_path, report_format
        if emit and out is not None and _same_folder(report.parent, out):
            report_format(report)           # the set's writer checks the rest
        else:
            check_report_path(report, force)
    data = start(job_file, model, use_example=not model)
    from trainplan.services.plan import parse_prices
    one_price, type_prices = parse_prices(price)
    merge(data, "cluster", gpus_per_node=gpus_per_node, usd_per_gpu_hour=one_price,
          inter_node_Gbps=inter_node_gbps, intra_node_GBps=intra_node_gbps,
          profile=o.as_path(profile))
    merge(data, "job", samples=samples, epochs=epochs, images_per_sample=images_per_sample,
          text_tokens=text_tokens, document_tokens=document_tokens, **o.image_size(image_size))
    merge(data, "job", seq_len=seq_len, global_batch=global_batch, tokens=tokens,
          precision=precision, optimizer=optimizer, framework=framework, adamw_impl=adamw_impl,
          trainable=o.trainable(lora, lora_rank), lora_rank=lora_rank,
          base_weights=base_weights, double_quant=double_quant,
          lora_targets=o.lora_targets(lora_targets),
          frozen=tuple(o.split_list(frozen)) or None,
          trained_in_full=tuple(o.split_list(train_in_full)) or None)
    drop_strategy(data)                    # the search chooses the strategy
    gpu_types = [*(gpu or []), *([gpu_file] if gpu_file is not None else [])]  # searched together
    req = plan_request(data, gpu=gpu_types or None, gpus=gpus, objective=objective, deadline_days=deadline_days,
                       budget_usd=budget_usd, headroom_gib=headroom_gib, top=top,
                       uneven_stages=uneven_stages, quantile=quantile, coverage=coverage,
                       emit=None if emit is None else o.split_list(emit),
                       out=o.as_path(out), prices=type_prices)
    bar = DelayedBar(enabled=not as_json)
    try:
        result, sweep = run_plan(req, bar)
    finally:
        bar.close()
    # a report in the launch files' folder is part of their set (written and switched with
    # them in one step); elsewhere it is written after them
    from trainplan.export import DEFAULT_OUT
    in_set = (report is not None and bool(req.emit)
              and _same_folder(report.parent, Path(req.out or DEFAULT_OUT)))
    extra = None
    if report is not None:
        from trainplan.report.content import plan_report
        from trainplan.report.output import render_report, write_report

        def build() -> object:
            return plan_report(result, sweep.job, sweep.template)
        if in_set:
            extra = {report.name: render_report(report, build)}
    paths = emit_winner(req, result, sweep, None, force, extra=extra)
    if report is not None and not in_set:
        paths = [*paths, write_report(report, build, force)]
    if as_json:
        from trainplan.report.echo import print_json
        print_json({**result.model_dump(mode="json"), "emitted": [str(p) for p in paths]})
    else:
        from trainplan.report.plan import render
        render(result)
    from trainplan.report.echo import confirm
    for p in paths:                       # after the result, on stderr
        confirm(f"wrote {p}")


def _same_folder(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same folder (links above them followed; either may not
    exist yet)."""
    import os
    return os.path.realpath(a) == os.path.realpath(b)
