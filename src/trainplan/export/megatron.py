"""Megatron-LM ``pretrain_gpt.py``: the argument list and its torchrun launch.

Flag names are the ones Megatron-LM's ``megatron/training/arguments.py`` defines (many are
generated from ``ModelParallelConfig``/``TransformerConfig`` fields by ``ArgumentGroupFactory``);
``tests/unit/export/data/megatron_core_v0.16.1_args.json`` holds the parser's options at the
pinned release (core_v0.16.1), which the tests parse every emitted argument list with.
Notable current names: virtual stages are ``--num-virtual-stages-per-pipeline-rank``
(``--virtual-pipeline-model-parallel-size`` is not a CLI flag); uneven stages use
``--decoder-first-pipeline-num-layers``/``--decoder-last-pipeline-num-layers``; ZeRO-1 is
``--use-distributed-optimizer``; ZeRO-2/3 are Megatron-FSDP (``--use-megatron-fsdp
--data-parallel-sharding-strategy optim_grads|optim_grads_params``, which requires
``--ckpt-format fsdp_dtensor`` and CUDA_DEVICE_MAX_CONNECTIONS unset or > 1).
"""

from __future__ import annotations

import math

from trainplan.errors import InputError
from trainplan.export.facts import lr_schedule, model_facts
from trainplan.export.spec import LaunchSpec, checkpoint_comment, env_checks, shell_join
from trainplan.io.formats import comment
from trainplan.spec.framework import fused_groups, get_framework
from trainplan.spec.model import MoE

#: The Megatron-LM release the arguments are checked against (tests/unit/export/data/
#: megatron_core_v0.16.1_args.json, read from megatron/training/arguments.py at that tag,
#: commit 55ac708; megatron-core 0.16.1 on PyPI is its megatron/core).
MEGATRON_RELEASE = "core_v0.16.1"

# trainplan's FP8 recipe -> Megatron-Core TransformerConfig.fp8_recipe / --fp8-recipe
MEGATRON_FP8_RECIPE = {"delayed": "delayed", "current": "tensorwise", "mxfp8": "mxfp8"}

# job.cp_comm_type -> Megatron-LM --cp-comm-type (megatron/training/arguments.py at d98e8a6)
CP_COMM_TYPE = {"ring": "p2p", "all_gather": "allgather", "all_to_all": "a2a"}

# The attention kernel the step was timed with (job.attention_kernel, else the framework
# profile's) -> Megatron-LM (--attention-backend, --flash-attention-version). AttnBackend
# (megatron/core/transformer/enums.py at d98e8a6): flash | fused | unfused | local | auto;
# LanguageModule._set_attention_backend (megatron/core/models/common/language_module/
# language_module.py) maps flash to NVTE_FLASH_ATTN=1 NVTE_FUSED_ATTN=0, fused to cuDNN's
# FusedAttention only (NVTE_FUSED_ATTN=1, the others 0), unfused to the plain softmax path.
# TransformerConfig.flash_attention_version (transformer_config.py, same commit: 2 | 3 | 4)
# pins the FlashAttention generation through NVTE_FLASH_ATTN_V2/V3/V4.
ATTENTION_BACKEND = {"cudnn": ("fused", None), "fa2": ("flash", 2), "fa3": ("flash", 3)}


def attention_args(spec: LaunchSpec) -> list[str]:
    """The attention backend of the kernel the plan priced: without memory-efficient attention
    (``strategy.flash_attention`` false) the unfused path, else the job's kernel or the
    framework profile's (``costmodel.compute.KernelModel.attn_eta`` reads the same two)."""
    if not spec.strategy.flash_attention:
        return ["--attention-backend", "unfused"]
    kernel = spec.job.attention_kernel or get_framework(spec.job.framework).attention_kernel
    if kernel not in ATTENTION_BACKEND:
        raise InputError("job.attention_kernel", kernel,
                         "fa2, fa3, cudnn or none for a Megatron-LM launch: its "
                         "--flash-attention-version offers FlashAttention 2, 3 and 4 only")
    backend, _version = ATTENTION_BACKEND[kernel]
    # core_v0.16.1 has no --flash-attention-version (added later, d98e8a6): Transformer Engine
    # picks the newest FlashAttention installed in the image
    return ["--attention-backend", backend]


def uneven_split(layers: int, pp: int, vp: int = 1) -> tuple[int, int, int]:
    """(first, middle, last) layers per pipeline rank when pp x vp does not divide the layers.

    Middle ranks get ceil(layers / (pp x vp)) x vp layers, the busiest stage the cost model
    assumes; the first and last ranks share the rest, each a multiple of vp (Megatron splits a
    rank's layers evenly over its vp chunks). Llama 3 405B: 126 layers on 16 ranks -> 7, 8, 7;
    with 2 virtual stages -> 6, 8, 8.
    """
    mid = math.ceil(layers / (pp * vp)) * vp
    rest = layers - (pp - 2) * mid
    first = (rest // 2) // vp * vp
    last = rest - first
    if pp < 3 or first < vp or last > mid or last % vp:
        raise InputError("strategy.pp", pp,
                         f"a pipeline size Megatron can split {layers} layers over unevenly "
                         f"with {vp} virtual stage(s) (first/last ranks smaller than the others)")
    return first, mid, last


def uneven_args(layers: int, pp: int, vp: int) -> list[str]:
    """The flags of an uneven pipeline split, the one the cost model priced
    (``Layout.edge_stage_layers``: the first and last ranks share the excess over the busiest).
    Megatron's own accounting first where it gives that split: ``--account-for-embedding-in-
    pipeline-split`` and ``--account-for-loss-in-pipeline-split`` count the embedding and the
    loss as a layer each (megatron/core/transformer/transformer_config.py: num_layers + 2
    divisible by pp, and per rank by vp), so the first and last ranks hold one layer fewer:
    Llama 3 405B's 126 layers in 16 x 8 chunks are 1 per chunk, or in 32 x 2 chunks 3/4/3.
    Otherwise the first and last ranks given explicitly (:func:`uneven_split`), each a
    multiple of vp."""
    from trainplan.costmodel.layout import Layout
    from trainplan.spec.strategy import Strategy
    lay = Layout.of(Strategy(pp=pp, vp=vp), dp=1)
    busiest = int(lay.layers_per_stage(layers))
    edge = int(lay.edge_stage_layers(layers))
    if (layers + 2) % (pp * vp) == 0 and edge == busiest - 1:
        return ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    first, _, last = uneven_split(layers, pp, vp)
    return ["--decoder-first-pipeline-num-layers", str(first),
            "--decoder-last-pipeline-num-layers", str(last)]


def router_args(moe: MoE) -> list[str]:
    """The model's router and its balancing (TransformerConfig moe_* fields, the routing in
    megatron/core/transformer/moe/moe_utils.py topk_routing_with_score_function at d98e8a6),
    and grouped GEMMs for the experts.

    * Softmax: Megatron's default takes the top-k logits and softmaxes them, i.e. the top-k
      weights renormalised (Mixtral, Qwen with norm_topk_prob); ``--moe-router-pre-softmax``
      softmaxes over all experts first and keeps the top-k weights as they are (Qwen1.5-MoE,
      DeepSeek-V2). Sigmoid (``--moe-router-score-function sigmoid``, DeepSeek-V3) always
      renormalises the top-k weights.
    * ``--moe-router-enable-expert-bias``: the per-expert bias added to the scores for the choice
      only (aux-loss-free balancing; Megatron updates it at ``moe_router_bias_update_rate``,
      1e-3 by default, DeepSeek-V3's bias update speed, arXiv:2412.19437 sec. 4.2).
    * ``--moe-router-topk-scaling-factor``: the factor on the weights (routed_scaling_factor).
    * ``--moe-router-num-groups``/``--moe-router-group-topk``: group-limited routing.
    * ``--moe-aux-loss-coeff``: TransformerConfig.moe_aux_loss_coeff defaults to 0.0, no
      balancing loss at all, so the model's recorded coefficient is written; per sequence
      (``--moe-router-load-balancing-type seq_aux_loss``) where the model computes it so.
    * ``--moe-grouped-gemm``: the local experts' GEMMs as one grouped GEMM (TEGroupedMLP);
      without it Megatron loops over the local experts (SequentialMLP), which the MoE README
      lists among the basic performance flags.
    """
    a = ["--moe-grouped-gemm"]
    if moe.router_score == "sigmoid":
        a += ["--moe-router-score-function", "sigmoid"]
    elif not moe.router_norm_topk:
        a.append("--moe-router-pre-softmax")
    if moe.router_expert_bias:
        a.append("--moe-router-enable-expert-bias")
    if moe.router_scaling != 1.0:
        a += ["--moe-router-topk-scaling-factor", f"{moe.router_scaling:g}"]
    if moe.router_group_topk:
        a += ["--moe-router-num-groups", str(moe.router_groups),
              "--moe-router-group-topk", str(moe.router_group_topk)]
    if moe.router_aux_loss_coef is not None:
        if moe.router_seq_aux:
            a += ["--moe-router-load-balancing-type", "seq_aux_loss"]
        a += ["--moe-aux-loss-coeff", f"{moe.router_aux_loss_coef:g}"]
    return a


def router_notes(moe: MoE) -> list[str]:
    """What the router flags cannot say: a balancing loss the model does not record (Megatron's
    default coefficient is 0), routing Megatron has no form for."""
    out = []
    if moe.router_aux_loss_coef is None:
        why = ("balancing comes from the expert bias (aux-loss-free); "
               if moe.router_expert_bias else "")
        out.append(f"NOTE: {why}the model's config records no load-balancing loss coefficient "
                   "and Megatron's default --moe-aux-loss-coeff is 0 (no auxiliary loss); add "
                   "one to ARGS if the run should have it")
    if moe.router_score == "sigmoid" and not moe.router_norm_topk and moe.top_k > 1:
        out.append("NOTE: the model keeps its sigmoid top-k weights unnormalised; Megatron's "
                   "sigmoid router always renormalises them (moe_utils.py)")
    if moe.router_group_topk and moe.router_score == "softmax":
        out.append(f"NOTE: Megatron ranks expert groups by the sum of each group's top "
                   f"{max(1, moe.top_k // moe.router_group_topk)} scores (moe_utils.py "
                   "group_limited_topk); DeepSeek-V2 ranks them by the best score")
    return out


def rope_norm_args(spec: LaunchSpec) -> list[str]:
    """RoPE base and scaling and the norm epsilon from the model's config.json
    (:func:`trainplan.export.facts.model_facts`); Megatron's defaults are 10000 and 1e-5
    (arguments.py at core_v0.16.1). Llama 3.1/3.2 scaling (rope_type llama3) is Megatron's
    --use-rope-scaling with --rope-scaling-factor, whose low/high frequency factors 1 and 4 and
    original context 8192 are fixed in code (rotary_pos_embedding.py _apply_scaling); YaRN
    (DeepSeek) is --rope-type yarn with --rotary-scaling-factor, --mscale, --mscale-all-dim.
    Other scalings (longrope) have no flag: refused."""
    f = model_facts(spec)
    a: list[str] = []
    if spec.model.decoder.position == "rope" and f.rope_theta is not None:
        a += ["--rotary-base", str(int(f.rope_theta))]
    sc = f.rope_scaling
    if sc and spec.model.decoder.position == "rope":
        kind = sc.get("rope_type", sc.get("type"))
        if kind == "llama3" and (sc.get("low_freq_factor"), sc.get("high_freq_factor"),
                                 sc.get("original_max_position_embeddings")) == (1.0, 4.0, 8192):
            a += ["--use-rope-scaling", "--rope-scaling-factor", f"{float(sc['factor']):g}"]
        elif kind == "yarn" and spec.model.decoder.mla:
            a += ["--rope-type", "yarn", "--rotary-scaling-factor", f"{float(sc['factor']):g}",
                  "--mscale", f"{float(sc.get('mscale', 1.0)):g}",
                  "--mscale-all-dim", f"{float(sc.get('mscale_all_dim', 0.0)):g}"]
        else:
            raise InputError("model.rope_scaling", str(kind),
                             "none, llama3 (factors 1/4, 8192) or yarn with MLA for a Megatron-LM "
                             "launch: core_v0.16.1 has no flags for this RoPE scaling")
    if f.norm_eps is not None:
        a += ["--norm-epsilon", f"{f.norm_eps:g}"]
    return a


def megatron_args(spec: LaunchSpec) -> list[str]:  # noqa: C901 - one flag group a branch
    """The pretrain_gpt.py arguments for the layout, the model shape and the job."""
    from trainplan.export.spec import check_shape_for
    check_shape_for(spec, "Megatron-LM")
    st, job, dec = spec.strategy, spec.job, spec.model.decoder
    a: list[str] = ["--use-mcore-models", "--transformer-impl", "transformer_engine"]
    # -- model shape
    a += ["--num-layers", str(dec.layers), "--hidden-size", str(dec.hidden),
          "--ffn-hidden-size", str(dec.ffn_hidden), "--num-attention-heads", str(dec.heads)]
    if dec.mla:       # multi-latent attention: Megatron-LM's _add_mla_args (arguments.py)
        mla = dec.mla
        a += ["--multi-latent-attention", "--kv-lora-rank", str(mla.kv_lora_rank),
              "--qk-head-dim", str(mla.qk_nope_head_dim),       # q_head_dim = qk + pos_emb
              "--qk-pos-emb-head-dim", str(mla.qk_rope_head_dim),
              "--v-head-dim", str(mla.v_head_dim)]
        if mla.q_lora_rank:                                    # 0: a full q_proj (V2-Lite)
            a += ["--q-lora-rank", str(mla.q_lora_rank)]
    else:
        a += ["--kv-channels", str(dec.d_head)]
        if dec.n_kv != dec.heads:
            a += ["--group-query-attention", "--num-query-groups", str(dec.n_kv)]
    if dec.mla or dec.qk_norm != "none":
        # gpt_layer_specs.py at d98e8a6: standard attention gets q/k_layernorm (a norm over
        # each head's dims, attention.py hidden_size_per_attention_head) only with
        # qk_layernorm; MLA gets its latent norms (the norm fused into linear_q_up_proj /
        # linear_kv_up_proj: DeepSeek's q_a_layernorm and kv_a_layernorm) only with it too
        a.append("--qk-layernorm")
    a += ["--seq-length", str(job.seq_len),
          "--max-position-embeddings", str(max(job.seq_len, dec.max_positions or 0))]
    a += ["--position-embedding-type",
          {"rope": "rope", "learned": "learned_absolute", "none": "none"}[dec.position]]
    if dec.mlp == "swiglu":
        a.append("--swiglu")
    elif dec.mlp == "relu2":     # megatron/training/arguments.py: --squared-relu
        a.append("--squared-relu")
    a += ["--normalization", "RMSNorm" if dec.norm == "rmsnorm" else "LayerNorm"]
    a += rope_norm_args(spec)
    if not dec.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if not (dec.attn_out_bias or dec.mlp_bias):
        a.append("--disable-bias-linear")
    if dec.attn_bias:
        a.append("--add-qkv-bias")
    if dec.moe:
        moe = dec.moe
        a += ["--num-experts", str(moe.num_experts), "--moe-router-topk", str(moe.top_k),
              "--moe-ffn-hidden-size", str(moe.expert_ffn_hidden),
              "--moe-token-dispatcher-type", "alltoall"]
        if moe.shared_experts:
            # TransformerConfig.moe_shared_expert_intermediate_size is the shared experts'
            # total: num_shared_experts x ffn size of each (transformer_config.py at d98e8a6);
            # one shared expert's size is its own where the model has one (Qwen2-MoE
            # shared_expert_intermediate_size), else the routed experts' (DeepSeek)
            each = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
            a += ["--moe-shared-expert-intermediate-size", str(moe.shared_experts * each)]
            if moe.shared_expert_gate:
                # the sigmoid gate h -> 1 on the shared output (moe/shared_experts.py
                # SharedExpertMLP gate_weight, TransformerConfig.moe_shared_expert_gate)
                a.append("--moe-shared-expert-gate")
        if moe.dense_layers:
            a += ["--moe-layer-freq",
                  f"([0]*{moe.dense_layers}+[1]*{dec.layers - moe.dense_layers})"]
        a += router_args(moe)
    a += attention_args(spec)
    # -- parallelism
    a += ["--tensor-model-parallel-size", str(st.tp), "--pipeline-model-parallel-size", str(st.pp)]
    if st.vp > 1:
        a += ["--num-virtual-stages-per-pipeline-rank", str(st.vp)]
    if st.pp > 1 and dec.layers % (st.pp * st.vp):
        a += uneven_args(dec.layers, st.pp, st.vp)
    a += ["--context-parallel-size", str(st.cp)]
    if st.cp > 1 and job.cp_comm_type:      # Megatron-LM's names (arguments.py --cp-comm-type)
        a += ["--cp-comm-type", CP_COMM_TYPE[job.cp_comm_type]]
    if st.ep > 1:
        a += ["--expert-model-parallel-size", str(st.ep)]
    if st.tp > 1 and (st.sequence_parallel or dec.moe):
        # MoE layers with TP train only with sequence parallelism (moe_layer.py at d98e8a6;
        # the megatron profile's layout rule, FrameworkProfile.moe_tp_needs_sp)
        a.append("--sequence-parallel")
    # -- data parallel sharding (ZeRO)
    if st.zero == 1:
        a += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    elif st.zero >= 2:
        a += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
              "optim_grads" if st.zero == 2 else "optim_grads_params",
              "--use-distributed-optimizer", "--ckpt-format", "fsdp_dtensor",
              "--overlap-grad-reduce", "--overlap-param-gather"]
    if st.offload_optimizer:
        a += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer",
              "--optimizer-offload-fraction", "1.0"]
    if st.offload_activations:      # arguments.py sets cpu_offloading when the count is > 0
        a += ["--cpu-offloading-num-layers", str(st.offload_activations)]
    # -- recompute
    if st.recompute == "selective":
        a += ["--recompute-granularity", "selective"]
    elif st.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform",
              "--recompute-num-layers", "1"]
    elif st.recompute == "layers":
        # block: the first N layers of each (virtual) pipeline chunk are recomputed
        per_chunk = max(1, math.ceil(st.recompute_layers / st.vp))
        a += ["--recompute-granularity", "full", "--recompute-method", "block",
              "--recompute-num-layers", str(per_chunk)]
    # -- what the plan assumed that Megatron-LM does not default to: the fused loss, no dropout
    if "cross_entropy" in fused_groups(get_framework(job.framework), job):
        a.append("--cross-entropy-loss-fusion")
    if job.logits_fp32 is False:
        # Megatron-LM (arguments.py at d98e8a6, validate_args) refuses --cross-entropy-loss-fusion
        # with --cross-entropy-fusion-impl te ('disabled due to stability issues'): no launch here
        # runs Transformer Engine's in-place loss, whose memory and time the plan assumed
        raise InputError("job.logits_fp32", "false",
                         "true or none for a Megatron-LM launch: Megatron-LM refuses "
                         "--cross-entropy-fusion-impl te with --cross-entropy-loss-fusion "
                         "(megatron/training/arguments.py, 'stability issues'), so its loss keeps "
                         "the fp32 logits")
    if dec.moe and "moe_permute" in fused_groups(get_framework(job.framework), job):
        a.append("--moe-permute-fusion")
    if not job.dropout:
        a += ["--hidden-dropout", "0.0", "--attention-dropout", "0.0"]
    # -- batch and precision
    a += ["--micro-batch-size", str(st.micro_batch), "--global-batch-size", str(job.batch_sequences)]
    if job.precision in ("bf16_mixed", "bf16_pure", "fp8_mixed"):
        a.append("--bf16")
    elif job.precision == "fp16_mixed":
        a += ["--fp16", "--initial-loss-scale", "65536"]
    if job.precision == "fp8_mixed":   # the recipe the plan timed (TransformerConfig.fp8_recipe)
        recipe = get_framework(job.framework).fp8_recipe_for(job)
        a += ["--fp8-format", "hybrid", "--fp8-recipe", MEGATRON_FP8_RECIPE[recipe]]
        if recipe == "delayed":
            a += ["--fp8-amax-history-len", "1024", "--fp8-amax-compute-algo", "max"]
    # -- training loop (placeholders where trainplan has no opinion)
    lr = lr_schedule(spec)
    tokenizer = model_facts(spec).tokenizer
    a += ["--train-iters", str(spec.train_steps),
          "--lr", f"{lr.peak:g}" if lr.peak else "$LR", "--min-lr",
          f"{lr.min_lr:g}" if lr.min_lr else "$MIN_LR",
          "--lr-decay-style", "cosine", "--lr-warmup-iters", str(lr.warmup_steps),
          "--weight-decay", "0.1", "--clip-grad", f"{float(job.grad_clip or 0.0):g}",
          "--data-path", "$DATA_PATH", "--split", "99,1,0",
          "--tokenizer-type", "HuggingFaceTokenizer",
          "--tokenizer-model", tokenizer or "$TOKENIZER_MODEL",
          "--save", "$CHECKPOINT_DIR", "--load", "$CHECKPOINT_DIR", "--save-interval", str(spec.save_interval),
          "--log-interval", "10", "--eval-interval", "1000", "--eval-iters", "10"]
    return a


def torchrun_args(spec: LaunchSpec) -> list[str]:
    """torchrun flags for one node's process group (static rendezvous, as Megatron's examples)."""
    return ["torchrun", "--nproc_per_node", str(spec.procs_per_node), "--nnodes", str(spec.nodes),
            "--node_rank", '"$NODE_RANK"', "--master_addr", '"$MASTER_ADDR"',
            "--master_port", str(spec.master_port)]


def render_megatron(spec: LaunchSpec) -> dict[str, str]:
    """megatron_pretrain.sh: the argument list as a bash array and the torchrun launch."""
    st = spec.strategy
    args = megatron_args(spec)
    lines = ["#!/bin/bash",
             "# Megatron-LM pretrain_gpt.py launch written by trainplan (plan or estimate) --emit megatron",
             f"# for Megatron-LM {MEGATRON_RELEASE} (pretrain_gpt.py and megatron/training of that tag)",
             f"# layout {st.layout()} on {spec.gpus} GPUs; DP = {spec.dp}, "
             f"{spec.grad_accum} micro-batches per step",
             "# Run on every node with NODE_RANK set (0..nodes-1) and MASTER_ADDR = node 0.",
             checkpoint_comment(spec),
             *[comment(n) for n in spec.document_mask_note()],
             "set -euo pipefail",
             ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}"',
             *env_checks(args)]
    if st.offload_params:
        lines.append("# NOTE: parameter offload has no Megatron-LM flag; use DeepSpeed ZeRO-Infinity")
    if spec.model.decoder.moe:
        lines += [comment(n) for n in router_notes(spec.model.decoder.moe)]
        if st.tp > 1 and not st.sequence_parallel:
            lines.append("# NOTE: --sequence-parallel is on although the plan priced it off: "
                         "Megatron's MoE layers train with TP > 1 only so (moe_layer.py)")
    if spec.model.decoder.qk_norm == "full":
        lines.append("# NOTE: the model normalises queries and keys over all heads (OLMo 2); "
                     "Megatron's --qk-layernorm normalises each head (a head_dim-wide norm)")
    if spec.model.vision:
        lines.append("# NOTE: pretrain_gpt.py trains the language decoder; VLMs need a "
                     "multimodal entry point (examples/multimodal)")
    if st.zero >= 2:
        lines.append("# Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS unset or > 1")
    else:
        lines.append("export CUDA_DEVICE_MAX_CONNECTIONS=1")
    lines.append("ARGS=(")
    i = 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            lines.append(f"  {shell_join([args[i], args[i + 1]])}")
            i += 2
        else:
            lines.append(f"  {shell_join([args[i]])}")
            i += 1
    lines.append(")")
    lines.append(shell_join(torchrun_args(spec)) + ' pretrain_gpt.py "${ARGS[@]}"')
    return {"megatron_pretrain.sh": "\n".join(lines) + "\n"}
