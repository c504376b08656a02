"""Audit a training run's claimed facts: against each other and against the physics.

A claims file (TOML/YAML/JSON, section ``[claims]``) states what a write-up says about a run:
hardware, samples and epochs, throughput, total FLOPs, wall-clock days, peak memory, batch and
accumulation. Each check below is one small function that names its arithmetic and returns a
:class:`Finding`; ``audit`` runs them all. Physics comes from the catalog (dense peak, HBM) and
the cost model (16 bytes/param model states, Korthikanti activations through
:func:`trainplan.costmodel.evaluate.evaluate` when a model preset is named).

Verdicts: ``contradiction`` (the claims cannot all be true), ``warning`` (possible only under
assumptions the claims do not state), ``ok``, ``info`` (a derived figure worth knowing).
The source document's case study (science.md section B) comes out contradictory: its throughput,
time and FLOPs disagree.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, ValidationError

from trainplan.conventions import GB, GiB, Optimizer, model_state_bytes
from trainplan.costmodel.flops import six_nd
from trainplan.display import HtmlDisplay
from trainplan.errors import InputError, from_validation_error
from trainplan.spec.base import Spec
from trainplan.spec.job import PrecisionName

# Best published utilisation on A100-class GPUs for large dense models is about half of peak:
# Megatron-LM 1T params 163 TFLOP/s/GPU = 52% of 312 (Narayanan et al. 2021; a hardware-FLOPs
# figure, it counts the recompute), PaLM 46.2% MFU (Chowdhery et al. 2022 Table 3); science.md
# section B. The round figure is quoted in the arithmetic ("at 50% MFU the FLOPs take ...").
BEST_PUBLISHED_MFU = 0.50
# Assumption: a claim above the best published figure plus a margin of about 8 points needs
# evidence (contradiction); above 1 it is impossible.
MAX_PLAUSIBLE_MFU = 0.60
# Assumption: relative disagreement tolerated between two ways of computing the same quantity
# (rounding in a write-up, epochs counted loosely); not from a publication.
TOLERANCE = 0.15
# Assumption: a claimed peak within 10% of the source's 10 B/param figure is taken to be it.
UNDERCOUNT_MATCH = 0.10
SECONDS_PER_DAY = 86400.0


class Claims(Spec):
    """What a run claims. Only ``gpu`` and ``gpus`` are required; checks run where their inputs exist."""

    gpu: str = Field(description="accelerator id or alias (see `trainplan gpus`)")
    gpus: PositiveInt = Field(description="GPUs the run used")
    model: str | None = Field(default=None, description="model preset (enables the memory model)")
    params: PositiveFloat | None = Field(default=None, description="N used for 6ND (default: the preset's)")
    samples: PositiveFloat | None = Field(default=None, description="unique samples per epoch")
    epochs: PositiveFloat = Field(default=1.0, description="passes over `samples`")
    samples_per_s_per_gpu: PositiveFloat | None = Field(default=None, description="claimed throughput per GPU")
    total_flops: PositiveFloat | None = Field(default=None, description="claimed training FLOPs")
    days: PositiveFloat | None = Field(default=None, description="claimed wall-clock days")
    peak_memory_gb: PositiveFloat | None = Field(default=None, description="claimed peak per GPU (GB as printed)")
    global_batch: PositiveInt | None = Field(default=None, description="claimed samples per optimizer step")
    grad_accum: PositiveInt | None = Field(default=None, description="claimed gradient-accumulation steps")
    micro_batch: PositiveInt | None = Field(default=None, description="claimed samples per GPU per forward/backward")
    tokens_per_sample: PositiveFloat | None = Field(default=None, description="text tokens per sample (for 6ND)")
    images_per_sample: float = Field(default=1.0, ge=0, description="images per sample (VLM runs)")
    image_size: PositiveInt | None = Field(default=None, description="image side in pixels")
    precision: PrecisionName = Field(default="bf16_mixed", description="numeric format the run trained in")
    optimizer: Optimizer = Field(default="adamw", description="optimizer the run used")
    zero: Literal[0, 1, 2, 3] | None = Field(default=None, description="ZeRO stage, if the run states it")
    recompute: Literal["none", "selective", "full"] | None = Field(default=None, description="activation recompute, if stated")
    frozen: tuple[str, ...] = Field(default=(), description="stack names kept frozen, e.g. [\"vision\"]")
    gas_rule: str | None = Field(default=None, description="a rule the run says it used to pick the "
                                 "accumulation, e.g. 'ceil(sqrt(batch/4))' (the source's)")


Verdict = Literal["contradiction", "warning", "ok", "info"]


@dataclass(frozen=True)
class Finding:
    """One check of the claims: its name, the verdict, one line, and the arithmetic behind it."""

    check: str
    verdict: Verdict
    summary: str
    arithmetic: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``json.dumps(f.to_dict())``)."""
        return asdict(self)


class Findings(HtmlDisplay, list[Finding]):
    """:func:`audit`'s findings, shown in a notebook as ``trainplan audit`` prints them."""

    display_kind: ClassVar[str] = "audit"

    @property
    def contradictions(self) -> int:  # ``trainplan audit`` exits 1 when any finding contradicts
        return sum(f.verdict == "contradiction" for f in self)


def _g(x: float) -> str:
    """Numbers as a reader checks them: up to 4 significant digits, thousands separators, 2.3e21."""
    if x == 0:
        return "0"
    if abs(x) >= 1e7 or abs(x) < 1e-3:
        return f"{x:.3g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


# ------------------------------------------------------------------------------ checks


def check_batch_split(global_batch, grad_accum, gpus, micro_batch=None) -> Finding:
    """micro-batch per GPU = global batch / (accumulation x data-parallel GPUs)."""
    mb = global_batch / (grad_accum * gpus)
    ar = [f"micro-batch = {global_batch} / ({grad_accum} x {gpus}) = {_g(mb)} samples per GPU"]
    if mb != int(mb) or mb < 1:
        return Finding("batch split", "contradiction",
                       "the global batch does not split into whole micro-batches", ar)
    if micro_batch is not None and micro_batch != int(mb):
        ar.append(f"claimed micro-batch {micro_batch} x {grad_accum} x {gpus} = "
                  f"{micro_batch * grad_accum * gpus} != {global_batch}")
        return Finding("batch split", "contradiction", "batch, accumulation and micro-batch disagree", ar)
    return Finding("batch split", "ok", f"{int(mb)} samples per GPU per micro-batch", ar)


def check_throughput_time(samples, epochs, sps_per_gpu, gpus, days, global_batch=None) -> Finding:
    """samples/s/GPU x GPUs x seconds must equal samples x epochs."""
    secs = days * SECONDS_PER_DAY
    done = sps_per_gpu * gpus * secs
    need = samples * epochs
    ratio = done / need
    ar = [f"wall time = {_g(days)} d x {SECONDS_PER_DAY:,.0f} = {_g(secs)} s",
          f"processed = {_g(sps_per_gpu)} samples/s/GPU x {gpus} GPUs x {_g(secs)} s = {_g(done)} samples",
          f"claimed  = {_g(samples)} x {_g(epochs)} epochs = {_g(need)} samples "
          f"(processed / claimed = {ratio:.1%})",
          f"at {_g(sps_per_gpu)} samples/s/GPU the data takes {_g(need / (sps_per_gpu * gpus) / SECONDS_PER_DAY)} days; "
          f"{_g(days)} days need {_g(need / (gpus * secs))} samples/s/GPU"]
    if global_batch:
        steps = need / global_batch
        ar.append(f"optimizer steps = {_g(need)} / {global_batch} = {_g(steps)}; step time "
                  f"{_g(global_batch / (sps_per_gpu * gpus))} s by throughput vs {_g(secs / steps)} s by time")
    if abs(ratio - 1.0) > TOLERANCE:
        return Finding("throughput x time vs samples", "contradiction",
                       f"throughput and time disagree by x{max(ratio, 1 / ratio):.1f}", ar)
    return Finding("throughput x time vs samples", "ok", "throughput, time and data agree", ar)


def implied_mfu(flops, gpus, seconds, peak_flops):
    """MFU = model FLOPs / (GPUs x seconds x dense peak) (Chowdhery et al. 2022, PaLM App. B)."""
    return flops / (gpus * seconds * peak_flops)


def check_flops_time(total_flops, gpus, days, peak_flops, gpu_name) -> Finding:
    """Total FLOPs over GPUs x seconds is a sustained rate; as a share of dense peak it is the MFU."""
    secs = days * SECONDS_PER_DAY
    rate = total_flops / (gpus * secs)
    mfu = implied_mfu(total_flops, gpus, secs, peak_flops)
    at_best = total_flops / (gpus * peak_flops * BEST_PUBLISHED_MFU) / SECONDS_PER_DAY
    ar = [f"{_g(total_flops)} FLOPs / ({gpus} GPUs x {_g(secs)} s) = {_g(rate / 1e12)} TFLOP/s per GPU",
          f"= {mfu:.1%} of the {gpu_name} dense peak {_g(peak_flops / 1e12)} TFLOP/s",
          f"best published MFU on this class of GPU is about {BEST_PUBLISHED_MFU:.0%} (limit used: "
          f"{MAX_PLAUSIBLE_MFU:.0%}); at {BEST_PUBLISHED_MFU:.0%} MFU the FLOPs take {_g(at_best)} days"]
    if mfu > 1.0:
        return Finding("FLOPs vs time vs hardware", "contradiction",
                       f"needs {mfu:.0%} of peak: impossible", ar)
    if mfu > MAX_PLAUSIBLE_MFU:
        return Finding("FLOPs vs time vs hardware", "contradiction",
                       f"needs {mfu:.1%} MFU, above anything published", ar)
    return Finding("FLOPs vs time vs hardware", "ok", f"implies {mfu:.1%} MFU", ar)


def check_flops_samples(total_flops, params, samples, epochs, tokens_per_sample=None,
                        image_tokens=None) -> Finding:
    """C = 6 N D (Kaplan et al. 2020 eq. 2.2): solve D / samples for the tokens per sample."""
    tps = total_flops / six_nd(params, samples * epochs)
    ar = [f"tokens per sample = {_g(total_flops)} / (6 x {_g(params)} x {_g(samples)} x {_g(epochs)}) "
          f"= {_g(tps)}",
          f"total tokens D = {_g(tps * samples * epochs)}, D/N = {_g(tps * samples * epochs / params)}"]
    if tokens_per_sample is not None:
        ar.append(f"claimed {_g(tokens_per_sample)} tokens per sample (ratio {tps / tokens_per_sample:.2f})")
        if abs(tps / tokens_per_sample - 1.0) > TOLERANCE:
            return Finding("FLOPs vs samples (6ND)", "contradiction",
                           "FLOPs and data disagree at the claimed tokens per sample", ar)
        return Finding("FLOPs vs samples (6ND)", "ok", "FLOPs and data agree", ar)
    if image_tokens is not None:
        ar.append(f"the model puts {_g(image_tokens)} image tokens in each sample, leaving "
                  f"{_g(tps - image_tokens)} text tokens")
        if tps < image_tokens:
            return Finding("FLOPs vs samples (6ND)", "contradiction",
                           "the FLOPs do not even cover the image tokens", ar)
    return Finding("FLOPs vs samples (6ND)", "info",
                   f"consistent if a sample has about {_g(tps)} tokens", ar)


def check_throughput_flops(sps_per_gpu, tokens_per_sample, params, peak_flops) -> Finding:
    """Throughput x 6N x tokens per sample is the FLOP rate per GPU the throughput implies."""
    rate = six_nd(params, sps_per_gpu * tokens_per_sample)
    mfu = rate / peak_flops
    ar = [f"{_g(sps_per_gpu)} samples/s x {_g(tokens_per_sample)} tokens x 6 x {_g(params)} = "
          f"{_g(rate / 1e12)} TFLOP/s per GPU = {mfu:.1%} MFU"]
    if mfu > MAX_PLAUSIBLE_MFU:
        return Finding("throughput vs FLOPs rate", "contradiction",
                       f"the throughput needs {mfu:.0%} MFU", ar)
    return Finding("throughput vs FLOPs rate", "info", f"the throughput implies {mfu:.1%} MFU", ar)


def check_gas_rule(global_batch, grad_accum, rule) -> Finding:
    """The source's 'golden ratio' GAS = ceil(sqrt(batch / 4)) (no published basis; science.md 5a)."""
    gas = math.ceil(math.sqrt(global_batch / 4.0))
    ar = [f"ceil(sqrt({global_batch} / 4)) = {gas}; claimed accumulation {grad_accum}",
          "the rule has no published basis: accumulation only splits a fixed global batch "
          "(it trades memory for time); the learning rate follows the global batch, not its split"]
    if gas != grad_accum:
        return Finding("accumulation vs the stated rule", "contradiction",
                       f"the stated rule {rule!r} gives {gas}, the run uses {grad_accum}", ar)
    return Finding("accumulation vs the stated rule", "ok", "the accumulation follows the stated rule", ar)


def check_memory_states(peak_gb, params, precision, optimizer, gpus, capacity_gib, zero=None,
                        trainable_params=None) -> Finding:
    """Model states per GPU (ZeRO paper sec. 3.1: 2 + 2 + 12 = 16 bytes/param for mixed-precision
    Adam) for each ZeRO stage, against the claimed peak; and the 10 bytes/param under-count."""
    import numpy as np

    from trainplan.costmodel.memory import model_state_bytes_per_gpu
    sb = model_state_bytes(precision, optimizer)
    n = trainable_params or params
    stages = np.arange(4)
    w_b, _, _ = model_state_bytes_per_gpu(params, sb.weights, 0.0, 0.0, 0.0, gpus, stages)
    _, g_b, o_b = model_state_bytes_per_gpu(n, 0.0, sb.grads, sb.master, sb.optim, gpus, stages)
    per = dict(enumerate((w_b + g_b + o_b).tolist()))    # frozen parameters: weights only
    claimed = peak_gb * GB
    cap = capacity_gib * GiB
    ar = [f"model states at {_g(sb.total)} B/param ({_g(sb.weights)} weights + {_g(sb.grads)} grads + "
          f"{_g(sb.master + sb.optim)} optimizer) x {_g(n)} trainable params = {_g(n * sb.total / GB)} GB",
          "per GPU: " + ", ".join(f"{'DDP' if z == 0 else f'ZeRO-{z}'} {_g(per[z] / GB)} GB" for z in range(4))]
    wrong = params * 10.0 / GB
    ar.append(f"the source's 2 + 8 = 10 B/param rule gives {_g(wrong)} GB (it omits gradients and fp32 "
              "master weights)")
    if claimed > cap * 1.0001:
        return Finding("memory: model states", "contradiction",
                       f"claimed {_g(peak_gb)} GB exceeds the {_g(capacity_gib)} GiB of the GPU", ar)
    if zero is not None and per[zero] > claimed:
        return Finding("memory: model states", "contradiction",
                       f"ZeRO-{zero} model states alone ({_g(per[zero] / GB)} GB) exceed the claimed "
                       f"{_g(peak_gb)} GB", ar)
    if per[0] > cap and zero is None:
        verdict: Verdict = "warning"
        summary = (f"unsharded states ({_g(per[0] / GB)} GB) exceed the GPU: the run must shard "
                   "(ZeRO/FSDP) but does not say so")
        if abs(wrong - peak_gb) / peak_gb < UNDERCOUNT_MATCH:
            summary += f"; the claimed {_g(peak_gb)} GB matches the 10 B/param under-count"
        return Finding("memory: model states", verdict, summary, ar)
    return Finding("memory: model states", "ok", "model states fit the claimed peak", ar)


def check_memory_activations(model, claims: Claims, tokens_per_sample: float, micro_batch: int,
                             capacity_gib: float) -> Finding:
    """Peak memory from the cost model (model states by ZeRO stage, Korthikanti activations by
    recompute mode, buffers) for the micro-batch the batch split implies."""
    import numpy as np

    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.evaluate import Layout, evaluate
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job

    seq = int(math.ceil(tokens_per_sample))
    job = Job(seq_len=seq, global_batch=claims.global_batch or micro_batch * claims.gpus,
              precision=claims.precision, optimizer=claims.optimizer,
              images_per_sample=claims.images_per_sample if model.vision else 0.0,
              image_size=claims.image_size, frozen=claims.frozen, framework="analytic")
    acc = get_accelerator(claims.gpu)
    # memory per GPU does not depend on how the claimed GPUs split into nodes: a count that is
    # not a whole number of the part's nodes (12 GPUs of 8-GPU nodes) is one domain here
    host = min(acc.gpus_per_host or acc.gpus_per_node, acc.gpus_per_node)  # NVL72: whole trays
    node = acc.gpus_per_node if claims.gpus % host == 0 else claims.gpus
    cluster = Cluster(accelerator=acc, gpus=claims.gpus, gpus_per_node=node)
    names = {0: "none", 1: "selective", 2: "full"}
    zs = [claims.zero] if claims.zero is not None else [0, 1, 2, 3]
    rcs = [{"none": 0, "selective": 1, "full": 2}[claims.recompute]] if claims.recompute else [0, 1, 2]
    grid = [(z, r) for z in zs for r in rcs]
    L = Layout(dp=claims.gpus, mb=micro_batch, zero=np.array([g[0] for g in grid]),
               rc=np.array([g[1] for g in grid]))
    r = evaluate(model, job, cluster, L)
    tot = np.asarray(r.mem_total) / GB
    act = np.asarray(r.mem_activations) / GB
    ar = [f"{model.name}, {seq} tokens per sample, micro-batch {micro_batch} (textbook profile, "
          "no framework buffers):"]
    for i, (z, rc) in enumerate(grid):
        ar.append(f"  ZeRO-{z}, recompute {names[rc]}: {_g(tot[i])} GB (activations {_g(act[i])} GB)")
    claimed = claims.peak_memory_gb
    cap = capacity_gib * GiB / GB
    fits = [grid[i] for i in range(len(grid)) if tot[i] <= cap]
    lowest = float(tot.min())
    if lowest > cap:
        return Finding("memory: activations", "contradiction",
                       f"no layout fits the {_g(capacity_gib)} GiB GPU at this micro-batch "
                       f"(lowest {_g(lowest)} GB)", ar)
    if claimed is not None and lowest > claimed * (1 + TOLERANCE):
        return Finding("memory: activations", "contradiction",
                       f"even the leanest layout needs {_g(lowest)} GB > claimed {_g(claimed)} GB", ar)
    if claims.zero is None or claims.recompute is None:
        desc = ", ".join(f"ZeRO-{z}+{names[rc]}" for z, rc in fits)
        return Finding("memory: activations", "warning",
                       f"fits only with {desc}; the claims state no sharding or recompute", ar)
    return Finding("memory: activations", "ok", "the stated layout fits", ar)


# ------------------------------------------------------------------------------ driver


def load_claims(path: str | Path) -> Claims:
    """Read ``[claims]`` from a TOML/YAML/JSON file (bad keys and values: InputError)."""
    from trainplan.services.jobfile import read_file
    from trainplan.io.files import path_kind
    if path_kind(path) is None:       # absent (or a name too long: the reader says which)
        try:
            os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise InputError("claims file", str(path), "an existing TOML, YAML or JSON file") \
                from None
        except (OSError, ValueError):
            pass
    data = read_file(path)
    if "claims" not in data:
        raise InputError("claims file", str(path), "a file with a [claims] table",
                         hint="see trainplan/examples/source_case_claims.toml")
    try:
        return Claims(**data["claims"])
    except ValidationError as e:
        raise from_validation_error(e, "claims.") from None


def audit(claims: Claims | dict[str, Any]) -> Findings:
    """Run every check whose inputs the claims provide (a :class:`Claims` or its keys, as in a
    claims file's ``[claims]`` table); each :class:`Finding` says its verdict and arithmetic.

    >>> fs = audit({"gpu": "a100_sxm_80gb", "gpus": 8, "days": 11.25, "total_flops": 5.9e21})
    >>> [f.verdict for f in fs]  # doctest: +SKIP
    """
    if not isinstance(claims, Claims):
        from trainplan.errors import expect_mapping
        try:
            claims = Claims(**expect_mapping("claims", claims))
        except ValidationError as e:
            raise from_validation_error(e, "claims.") from None
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.conventions import MATMUL_DTYPE
    acc = get_accelerator(claims.gpu)
    peak = acc.peak(MATMUL_DTYPE[claims.precision])
    model = None
    if claims.model:
        from trainplan.catalog.vlm import resolve_model
        model = resolve_model(claims.model)
    params = claims.params
    flops_params = params          # N of C = 6ND: the parameters a token passes through
    if model is not None:
        from trainplan.costmodel.params import model_params
        from trainplan.costmodel.vision_tokens import mean_llm_tokens_per_image
        counts = model_params(model)
        if params is None:
            params = float(counts.total)
        # an MoE token passes through its top-k experts only: 6 N_active D (Kaplan et al. 2020
        # sec. 2.1 counts the parameters used per token; DeepSeek-V3 tech report Table 1 trains
        # 671B total / 37B activated); the memory checks keep every parameter
        flops_params = float(counts.active) if counts.active < counts.total else params
    c = claims
    out: list[Finding] = []
    mb = None
    if c.global_batch and c.grad_accum:
        f = check_batch_split(c.global_batch, c.grad_accum, c.gpus, c.micro_batch)
        out.append(f)
        mb = c.global_batch / (c.grad_accum * c.gpus)
    if c.samples and c.samples_per_s_per_gpu and c.days:
        out.append(check_throughput_time(c.samples, c.epochs, c.samples_per_s_per_gpu, c.gpus, c.days,
                                         c.global_batch))
    if c.total_flops and c.days:
        out.append(check_flops_time(c.total_flops, c.gpus, c.days, peak, acc.name))
    tps = c.tokens_per_sample
    if c.total_flops and flops_params and c.samples:
        img = None
        if model is not None and model.vision:
            from trainplan.spec.job import Job
            sizes = Job(image_size=c.image_size)       # the claimed image side, else the tower's
            img = c.images_per_sample * mean_llm_tokens_per_image(model, sizes)
        out.append(check_flops_samples(c.total_flops, flops_params, c.samples, c.epochs, tps, img))
        tps = tps or c.total_flops / six_nd(flops_params, c.samples * c.epochs)
    if c.samples_per_s_per_gpu and tps and flops_params:
        out.append(check_throughput_flops(c.samples_per_s_per_gpu, tps, flops_params, peak))
    if c.peak_memory_gb and params:
        out.append(check_memory_states(c.peak_memory_gb, params, c.precision, c.optimizer, c.gpus,
                                       acc.hbm_gib, c.zero))
    if model is not None and tps and mb and mb == int(mb):
        out.append(check_memory_activations(model, c, tps, int(mb), acc.hbm_gib))
    if c.gas_rule and c.global_batch and c.grad_accum:
        out.append(check_gas_rule(c.global_batch, c.grad_accum, c.gas_rule))
    return Findings(out)


def findings_as_dicts(findings: list[Finding]) -> list[dict[str, Any]]:  # JSON-ready
    return [f.to_dict() for f in findings]
