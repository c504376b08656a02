"""What the launch files describe (:class:`LaunchSpec`) and the shell quoting they share; the
format modules import these from here, :mod:`trainplan.export` re-exports them."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import model_validator

from trainplan.costmodel.estimate import run_tokens
from trainplan.costmodel.totals import whole_steps
from trainplan.costmodel.validate import complete_strategy
from trainplan.errors import InputError
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.specs import Specs
from trainplan.spec.strategy import Strategy


# GPU vendor (catalog ``vendor``, upper case) -> (PyTorch container image, Kubernetes resource):
# NVIDIA NGC's PyTorch image and the NVIDIA device plugin's nvidia.com/gpu; AMD's ROCm PyTorch
# image (Docker Hub rocm/pytorch) and amd.com/gpu (ROCm/k8s-device-plugin); Intel Gaudi's image
# from its vault (docs.habana.ai, "Pull Prebuilt Containers") and habana.ai/gaudi (Intel Gaudi
# device plugin for Kubernetes).
VENDOR_CONTAINER = {
    "NVIDIA": ("nvcr.io/nvidia/pytorch:25.01-py3", "nvidia.com/gpu"),
    "AMD": ("rocm/pytorch:latest", "amd.com/gpu"),
    "INTEL/HABANA": ("vault.habana.ai/gaudi-docker/1.16.2/ubuntu22.04/habanalabs/"
                     "pytorch-installer-2.2.2:latest", "habana.ai/gaudi"),
}


def checkpoint_steps(est: Any) -> int | None:
    """Steps between checkpoints for an Estimate: its goodput-optimal checkpoint interval
    (``totals.checkpoint_interval_hours``) over its step time, at least 1; None where it has
    none (no token count, or a cluster that never fails)."""
    hours = est.totals.checkpoint_interval_hours
    if hours is None or not est.time.step_s > 0:
        return None
    return max(1, round(hours * 3600.0 / est.time.step_s))


class LaunchSpec(Specs):
    """What the launch files describe: the specs of the chosen layout (:class:`Specs`) and the
    program to run. The strategy is completed on construction: dp derived and the framework's
    rules applied (recompute resolved to what the framework offers)."""

    script: str = "train.py"
    script_args: tuple[str, ...] = ()
    python_module: bool = False            # run ``python -m script`` (torchtitan.train)
    job_name: str = "trainplan"
    image: str | None = None               # None: the vendor's PyTorch image (container_image)
    master_port: int = 29500
    notes: tuple[str, ...] = ()
    #: peak learning rate of ``scale batch``'s advice for this run (services.estimate.
    #: with_lr_advice); None: a placeholder in the files
    peak_lr: float | None = None
    #: (framework, version) chosen where not the default (export.versions.PINNED)
    versions: tuple[tuple[str, str], ...] = ()
    wall_clock_hours: float | None = None   # predicted, with failures and checkpoints
    #: steps between checkpoints: the interval the wall-clock was predicted with (the goodput
    #: optimum, costmodel.reliability.best_goodput) over the step time; None: not planned
    checkpoint_interval_steps: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _complete(cls, data: Any) -> Any:
        if isinstance(data, dict) and all(isinstance(data.get(k), t) for k, t in
                                          (("model", Model), ("job", Job), ("cluster", Cluster),
                                           ("strategy", Strategy))):
            data = {**data, "strategy": complete_strategy(data["model"], data["job"],
                                                          data["cluster"], data["strategy"])}
        return data

    @property
    def gpus(self) -> int:
        return self.cluster.gpus

    @property
    def nodes(self) -> int:
        """Hosts the launch spans: the cluster's nodes, or where one fast-link domain spans
        several hosts (GB200 NVL72: 18 trays of 4 GPUs), the hosts (``gpus_per_host``)."""
        return max(1, -(-self.cluster.gpus // self.procs_per_node))

    def training_notes(self) -> list[str]:
        """What the training script must do that no launcher flag says: train LoRA adapters
        (the planned rank) on a frozen base, keep frozen parts frozen."""
        job = self.job
        out = []
        if job.trainable == "lora":
            out.append(f"LoRA: the plan trains rank-{job.lora_rank} adapters on the decoder's "
                       "linear layers of a frozen base; set them up in the training script "
                       f"(e.g. peft LoraConfig(r={job.lora_rank}, target_modules='all-linear'))")
            if job.trained_in_full:
                out.append(f"trained in full beside the adapters: {', '.join(job.trained_in_full)} "
                           "(peft modules_to_save, as the plan assumes)")
        elif job.frozen:
            out.append(f"frozen: {', '.join(job.frozen)} (requires_grad=False in the training "
                       "script, as the plan assumes)")
        if job.base_weights is not None:
            dtype = {"fp16_mixed": "float16", "fp32": "float32"}.get(job.precision, "bfloat16")
            out.append(f"4-bit base: load the model with transformers BitsAndBytesConfig("
                       f"load_in_4bit=True, bnb_4bit_quant_type='{job.base_weights}', "
                       f"bnb_4bit_use_double_quant={job.double_quant}, "
                       f"bnb_4bit_compute_dtype=torch.{dtype}), as the plan assumes")
        return out + self.document_mask_note()

    def document_mask_note(self) -> list[str]:
        """The document mask the plan priced (``job.document_tokens``): no launcher flag sets it,
        the data pipeline and the attention kernel do."""
        if self.job.document_tokens is None:
            return []
        return [f"document mask: the plan prices attention within packed documents (E(d^2)/E(d) "
                f"= {self.job.document_tokens:g} tokens, job.document_tokens); the data pipeline "
                "must mark document boundaries and the attention kernel apply them (flash-attn "
                "varlen with cu_seqlens, Transformer Engine THD, flex attention's block-causal "
                "mask), else attention spans the whole sequence and the step is slower than planned"]

    @property
    def _vendor(self) -> tuple[str, str]:
        return VENDOR_CONTAINER.get(self.cluster.accelerator.vendor.upper(),
                                    VENDOR_CONTAINER["NVIDIA"])

    @property
    def container_image(self) -> str:
        """The image the pods run: the given one, else the GPU vendor's PyTorch container
        (:data:`VENDOR_CONTAINER`)."""
        return self.image or self._vendor[0]

    def version(self, framework: str) -> str:
        """The version of ``framework`` the files are written for (export.versions)."""
        from trainplan.export.versions import version_of
        return version_of(self.versions, framework)

    @property
    def gpu_resource(self) -> str:
        """The Kubernetes extended resource the vendor's device plugin exposes for its GPUs."""
        return self._vendor[1]

    @property
    def procs_per_node(self) -> int:
        """Processes (GPUs) per host: the node, or the accelerator's host where smaller."""
        host = self.cluster.accelerator.gpus_per_host or self.cluster.node_size
        return min(self.cluster.gpus, self.cluster.node_size, host)

    @property
    def dp(self) -> int:
        """Data-parallel size as the planner derives it (``complete_strategy``)."""
        return int(complete_strategy(self.model, self.job, self.cluster, self.strategy).dp or 1)

    @property
    def grad_accum(self) -> int:
        return self.job.batch_sequences // (self.strategy.micro_batch * self.dp)

    @property
    def save_interval(self) -> int:
        """Steps between checkpoints: the planned interval, else 1,000 (a placeholder)."""
        return self.checkpoint_interval_steps or 1000

    @property
    def train_steps(self) -> int:
        tokens = run_tokens(self.model, self.job)     # the steps the totals charge
        return int(whole_steps(tokens, self.job.useful_batch_tokens)) if tokens else 1000

    def program(self) -> list[str]:
        """The command after ``torchrun [flags]``: script (or -m module) and its arguments."""
        head = ["-m", self.script] if self.python_module else [self.script]
        return head + list(self.script_args)


def check_shape_for(spec: "LaunchSpec", framework: str) -> None:
    """Refuse a launch whose model shape the framework's arguments written here cannot state
    (a linear-attention / SSM mixer, attention sinks or output gates, chunked attention): a
    file describing a plain GPT instead would train another model."""
    from trainplan.errors import InputError
    dec = spec.model.decoder
    parts = [name for name, has in (
        ("a linear-attention / SSM mixer", dec.mixer is not None),
        ("attention sinks", dec.attn_sinks), ("a gated attention output", dec.attn_gate),
        ("chunked attention", bool(dec.chunked_layers))) if has]
    if parts:
        raise InputError("model", spec.model.name, f"a model whose shape a {framework} launch "
                         f"file written by trainplan states (this one has {', '.join(parts)})",
                         hint="estimate and plan still run; write the launch by hand")


def check_ep_for(spec: "LaunchSpec", framework: str) -> None:
    """The layout's expert parallelism as the emitted framework draws it (the same rule as the
    plan's, :func:`trainplan.costmodel.layout.ep_ranks_ok`, under that framework's profile): a
    layout priced under Megatron-Core's folding may take context-parallel ranks into EP, which
    DeepSpeed-MoE (EP within dp) and torchtitan (EP a multiple of cp) cannot launch.
    Raises InputError naming strategy.ep."""
    from trainplan.costmodel.layout import Layout, context, ep_ranks_ok, ep_ranks_valid
    from trainplan.errors import InputError
    from trainplan.spec.framework import get_framework

    st = spec.strategy
    if st.ep == 1:
        return
    fw = get_framework(framework)
    L = Layout.of(st, spec.dp)
    ctx = context(spec.model, spec.job, spec.gpus, fw)
    if not bool(ep_ranks_ok(L, ctx)):
        raise InputError("strategy.ep", st.ep, f"{ep_ranks_valid(L, ctx)} to launch it with "
                         f"{framework} (the plan priced it under {spec.job.framework})")


#: Export format -> the framework profile (catalog frameworks.json) whose layout rules it must
#: meet: the program it writes runs exactly what that framework runs. Accelerate + TRL runs
#: PyTorch FSDP (the ``fsdp`` profile, alias ``accelerate``). The generic launchers (torchrun,
#: SLURM, Kubernetes) start whatever program the set holds and have no rules of their own.
FORMAT_FRAMEWORK = {"deepspeed": "deepspeed", "megatron": "megatron", "torchtitan": "torchtitan",
                    "accelerate": "fsdp", "torchtune": "torchtune"}


def check_layout_for(spec: "LaunchSpec", fmt: str) -> None:
    """Refuse a layout the target framework does not run exactly: the layout rules
    (:data:`trainplan.costmodel.layout.RULES`, the ones the plan's search applies) under the
    target's framework profile. A Megatron layout with ZeRO-1 (its distributed optimizer) is not
    a torchtitan one (FSDP2 has stages 0, 2, 3), interleaved stages are not DeepSpeed's pipeline,
    activation offload is not in a framework that has none. Raises InputError naming the knob,
    the value and what the target runs."""
    from trainplan.costmodel.layout import Layout, context, first_broken
    from trainplan.spec.framework import get_framework

    target = FORMAT_FRAMEWORK.get(fmt)
    if target is None:
        return
    fw = get_framework(target)
    st = spec.strategy
    L = Layout.of(st, spec.dp)
    ctx = context(spec.model, spec.job, spec.gpus, fw)._replace(uneven=st.uneven_stages)
    rule = first_broken(L, ctx)
    if rule is not None:
        from trainplan.costmodel.validate import _value
        raise InputError(rule.field, _value(rule.field, st, spec.job, spec.dp),
                         f"{rule.valid(L, ctx)}, to emit --emit {fmt} (the plan's layout "
                         f"{st.layout()} was priced under {spec.job.framework}; {fmt} would run "
                         "something else)",
                         hint=f"plan with --framework {target} to get a layout it runs")


def checkpoint_comment(spec: "LaunchSpec") -> str:
    """One comment line on the checkpoint interval the files carry."""
    if spec.checkpoint_interval_steps:
        return (f"# Checkpoint every {spec.checkpoint_interval_steps} steps: the interval that "
                "maximises goodput, which the predicted wall-clock and cost assume.")
    return ("# Checkpoint every 1000 steps: a placeholder (the plan has no token count or failure "
            "rate to choose one from).")


def env_checks(args: list[str]) -> list[str]:
    """``: "${VAR:?set VAR}"`` for each placeholder variable the arguments use (PLACEHOLDERS.md
    lists them); CHECKPOINT_DIR defaults to ./checkpoints."""
    import re
    names = sorted({m for a in args for m in re.findall(r"\$(\w+)", a)})
    return [': "${CHECKPOINT_DIR:=./checkpoints}"' if n == "CHECKPOINT_DIR" else
            f': "${{{n}:?set {n} (see PLACEHOLDERS.md)}}"' for n in names]


def shell_join(args: list[str]) -> str:
    """Quote arguments for bash (``shlex.quote``), leaving only whole ``$VAR``, ``"$VAR"`` and
    ``"$HOST:$PORT"`` references expandable: ``$(...)`` or backticks in user text stay literal.
    A bare ``$VAR`` is written double-quoted (``"$VAR"``): one word, whatever spaces or glob
    characters its value has (bash(1), "Word Splitting" and "Pathname Expansion")."""
    import re
    ref = re.compile(r'"\$\w+(:\$\w+)*"')
    bare = re.compile(r"\$\w+")
    return " ".join(a if ref.fullmatch(a) else f'"{a}"' if bare.fullmatch(a) else shlex.quote(a)
                    for a in args)