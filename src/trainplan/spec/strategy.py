"""Parallel strategy spec: how one job is laid out on the cluster."""

from __future__ import annotations

from typing import Literal

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
