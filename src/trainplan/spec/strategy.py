"""Parallel strategy spec: how one job is laid out on the cluster."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, model_validator

from trainplan.spec.base import Spec

Recompute = Literal["none", "selective", "full", "layers", "op_selective"]
ZERO_FSDP_NAMES = {
    0: "DDP (no sharding)",
    1: "ZeRO-1 (optimizer states sharded; Megatron distributed optimizer)",
    2: "ZeRO-2 (optimizer states and gradients sharded; FSDP SHARD_GRAD_OP)",
    3: "ZeRO-3 (everything sharded; FSDP FULL_SHARD / FSDP2 fully_shard)",
}


class Strategy(Spec):
    """TP x CP x PP x DP = GPUs (EP divides DP for the experts).

    ``dp`` is derived from the GPU count when omitted. Gradient accumulation is derived:
    global_batch / (micro_batch x dp).
    """

    tp: PositiveInt = Field(default=1, description="tensor-parallel degree (within a node)")
    pp: PositiveInt = Field(default=1, description="pipeline-parallel stages")
    vp: PositiveInt = Field(default=1, description="virtual pipeline stages per rank (interleaving)")
    dp: PositiveInt | None = Field(default=None, description="data-parallel degree (default: gpus / (tp x pp x cp))")
    cp: PositiveInt = Field(default=1, description="context-parallel degree (sequence split across GPUs)")
    ep: PositiveInt = Field(default=1, description="expert-parallel degree (MoE)")
    sequence_parallel: bool = Field(default=True, description="Megatron SP (only meaningful with tp > 1)")
    zero: Literal[0, 1, 2, 3] = Field(default=1, description="ZeRO stage: 0 none, 1 optimizer states, 2 + gradients, 3 + weights sharded; "
                                      "not given: the framework's default (FSDP1, llm-foundry, torchtitan 3, or 2 with a "
                                      "pipeline; Megatron, DeepSpeed 1; DDP/HF Trainer 0)")
    micro_batch: PositiveInt = Field(default=1, description="sequences per GPU per forward/backward")
    recompute: Recompute | None = Field(default=None, description="activation recompute; none given: "
                                        "selective where the framework offers it, else none")
    recompute_layers: int = Field(default=0, ge=0, description="layers per stage fully recomputed "
                                  "when recompute == 'layers'")
    offload_optimizer: bool = Field(default=False, description="optimizer states and step on the CPU (ZeRO-Offload)")
    offload_params: bool = Field(default=False, description="weights kept on the CPU (ZeRO-Infinity style; ZeRO-3)")
    offload_activations: int = Field(default=0, ge=0, description="decoder layers per pipeline stage "
                                     "whose saved activations go to host memory in the forward "
                                     "and come back for the backward (Megatron-Core "
                                     "--cpu-offloading-num-layers; DeepSpeed cpu_checkpointing "
                                     "and torchtune enable_activation_offloading: every layer)")
    flash_attention: bool = Field(default=True, description="memory-efficient attention (no seq x seq score matrix kept)")
    uneven_stages: bool = Field(default=False, description="allow layers not divisible by pp x vp (the "
                                "busiest stage gets the extra layers; Megatron "
                                "--decoder-first/last-pipeline-num-layers)")

    @model_validator(mode="after")
    def _check(self) -> "Strategy":
        if self.vp > 1 and self.pp == 1:
            raise ValueError("vp (virtual stages) > 1 needs pp > 1")
        if self.offload_params and self.zero != 3:
            raise ValueError("offload_params needs zero = 3 (parameters must be sharded)")
        return self

    def layout(self) -> str:
        """The layout shorthand plan and estimate print, read back by :func:`parse_layout`
        (grammar: :data:`LAYOUT_GRAMMAR`)."""
        parts = [f"TP{self.tp}"]
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        parts.append(f"PP{self.pp}" + (f"x{self.vp}" if self.vp > 1 else ""))
        parts.append(f"DP{self.dp}" if self.dp else "DP?")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        parts.append(f"Z{self.zero}")
        parts.append(f"mb{self.micro_batch}")
        rc = {"none": "", "selective": "sel", "full": "full", None: "", "op_selective": "opsac",
              "layers": f"rc{self.recompute_layers}"}[self.recompute]
        if rc:
            parts.append(rc)
        if self.offload_optimizer:
            parts.append("offopt")
        if self.offload_params:
            parts.append("offparam")
        if self.offload_activations:
            parts.append(f"offact{self.offload_activations}")
        return " ".join(parts)


#: The layout shorthand (``Strategy.layout``, ``parse_layout``): space-separated tokens, in
#: this order, those in brackets only when not the default.
LAYOUT_GRAMMAR = """\
TP<n>          tensor-parallel degree
[CP<n>]        context-parallel degree (when > 1)
PP<n>[x<v>]    pipeline stages, x virtual stages per rank (interleaved; when > 1)
DP<n> | DP?    data-parallel degree (DP?: derived from the GPU count)
[EP<n>]        expert-parallel degree (when > 1)
Z<n>           ZeRO / FSDP stage 0-3
mb<n>          micro-batch (sequences)
[sel | full | opsac | rc<k>]   recompute: selective, full, per-op selective, the first k
               layers of each stage in full; none when absent
[offopt] [offparam] [offact<n>]   optimizer / parameter offload, activations of n layers
               per stage offloaded to host memory
e.g. "TP8 PP4x2 DP16 Z1 mb1 sel" or "TP1 PP1 DP64 Z3 mb2 full offopt offparam"
"""

_LAYOUT_TOKENS = (
    (r"TP(\d+)", lambda m: {"tp": int(m[1])}),
    (r"CP(\d+)", lambda m: {"cp": int(m[1])}),
    (r"PP(\d+)(?:x(\d+))?", lambda m: {"pp": int(m[1]), "vp": int(m[2] or 1)}),
    (r"DP(\d+|\?)", lambda m: {"dp": None if m[1] == "?" else int(m[1])}),
    (r"EP(\d+)", lambda m: {"ep": int(m[1])}),
    (r"Z([0-3])", lambda m: {"zero": int(m[1])}),
    (r"mb(\d+)", lambda m: {"micro_batch": int(m[1])}),
    (r"sel", lambda m: {"recompute": "selective"}),
    (r"full", lambda m: {"recompute": "full"}),
    (r"opsac", lambda m: {"recompute": "op_selective"}),
    (r"rc(\d+)", lambda m: {"recompute": "layers", "recompute_layers": int(m[1])}),
    (r"offopt", lambda m: {"offload_optimizer": True}),
    (r"offparam", lambda m: {"offload_params": True}),
    (r"offact(\d+)", lambda m: {"offload_activations": int(m[1])}),
)


def parse_layout(text: str) -> dict[str, Any]:
    """The strategy fields of a layout shorthand as :meth:`Strategy.layout` prints it (the one
    grammar, :data:`LAYOUT_GRAMMAR`); what it leaves out is the default it stands for
    (no CP, EP, virtual stages, recompute or offload). Raises InputError naming the token."""
    import re
    from trainplan.errors import InputError

    out: dict[str, Any] = {"cp": 1, "ep": 1, "vp": 1, "recompute": "none",
                           "offload_optimizer": False, "offload_params": False,
                           "offload_activations": 0}
    seen: set[str] = set()
    for token in str(text).split():
        for pattern, fields in _LAYOUT_TOKENS:
            m = re.fullmatch(pattern, token)
            if m:
                if pattern in seen:
                    raise InputError("--layout", token, "each token once (" + text + ")")
                seen.add(pattern)
                out.update(fields(m))
                break
        else:
            raise InputError("--layout", token, "one of the layout tokens TP<n>, CP<n>, "
                             "PP<n>[x<v>], DP<n>, EP<n>, Z<0-3>, mb<n>, sel, full, opsac, rc<k>, "
                             "offopt, offparam, offact<n> (docs/plan.md, 'Layout shorthand')")
    for need, what in (("TP", "TP<n>"), ("PP", "PP<n>"), ("Z", "Z<n>"), ("mb", "mb<n>")):
        if not any(p.startswith(need) for p in seen):
            raise InputError("--layout", text, f"a layout with {what} (e.g. 'TP8 PP4x2 DP16 Z1 "
                             "mb1 sel', as plan prints it)")
    return out

