"""The whole cost model for (model, job, cluster) and one or many layouts, on one page.

``evaluate`` reads like the math: parameters -> FLOPs -> memory -> per-layer time -> pipeline
-> communication -> step -> run totals. Layout fields may be Python numbers (one strategy) or
numpy arrays of equal length (many candidates, used by the search): the same code serves both,
so the search has no cost formulas of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.conventions import ACTIVATION_BYTES, GiB, MATMUL_DTYPE, model_state_bytes
from trainplan.costmodel import collectives as coll
from trainplan.costmodel import flops as fl
from trainplan.costmodel import memory as mem
from trainplan.costmodel import timing as tm
from trainplan.costmodel.overheads import hf_step_memory, implementation_profile
from trainplan.costmodel.params import lora_params, model_params, stack_params
from trainplan.costmodel.vision import exposed_data_time, vision_costs
from trainplan.spec.cluster import NCCL_RING_SHARE, NIC_BUSBW_SHARE, Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model


@dataclass
class Layout:
    """Strategy knobs as numbers or numpy arrays (recompute as a code: 0 none, 1 selective,
    2 full, 3 first-k-layers)."""

    tp: Any = 1
    pp: Any = 1
    vp: Any = 1
    dp: Any = 1
    cp: Any = 1
    ep: Any = 1
    sp: Any = True
    zero: Any = 1
    mb: Any = 1
    rc: Any = 1
    rc_layers: Any = 0
    off_opt: Any = False
    off_par: Any = False
    flash: Any = True


# CPU-side optimizer throughput when states are offloaded (DeepSpeed CPU-Adam): an assumption
# of order of magnitude (Ren et al. 2021, ZeRO-Offload, sec. 5 reports CPU-Adam updates of
# billions of parameters per second on a server CPU).
CPU_ADAM_PARAMS_PER_S = 1.0e9
# host<->device: PCIe Gen4 x16 is 32 GB/s per direction (PCI-SIG 4.0 spec); ~25 GB/s achievable
# with pinned memory (an assumption; measure yours).
PCIE_GBPS = 25.0


def evaluate(model: Model, job: Job, cluster: Cluster, L: Layout) -> dict[str, Any]:
    """Everything the physics concludes for the layouts in ``L``; arrays broadcast."""
    acc, eff = cluster.accelerator, cluster.accelerator.efficiency
    dec = model.decoder
    sp_ = stack_params(dec)
    prof = implementation_profile(job.implementation, job.precision)
    s = job.seq_len
    n_gpus = L.tp * L.pp * L.dp * L.cp
    m = job.batch_sequences / (L.mb * L.dp)                       # gradient accumulation
    tokens_step = job.batch_tokens
    act_b = ACTIVATION_BYTES[job.precision]
    peak = acc.peak(MATMUL_DTYPE[job.precision])
    hbm_bps = acc.hbm_bw_tbps * 1e12
    dropout = job.dropout or prof.dropout

    # ---- 1. parameters --------------------------------------------------------------------
    P = model_params(model)
    vis = vision_costs(model, job, L, cluster)                # vision tower + projector (first stage)
    trainable_frac_dec = 0.0 if dec.name in job.frozen else 1.0
    lora = job.trainable == "lora"

    # ---- 2. FLOPs per step (model and hardware) --------------------------------------------
    lin = fl.linear_flops_per_token(dec)
    attn_core = fl.attention_core_flops_per_token(dec, s, causal=True)
    moe_layers = sp_.moe_layers
    layer_fwd_dense = fl.layer_forward_flops_per_token(dec, s, causal=True)
    fwd_tok_head = fl.lm_head_flops_per_token(dec)
    fwd_tok_layers = fl.stack_forward_flops_per_token(dec, s, causal=True) - fwd_tok_head
    # backward: activation grads always flow (x1); weight grads only where trainable (x1)
    wgrad = 0.0 if (lora or trainable_frac_dec == 0.0) else 1.0
    train_mult = 2.0 + wgrad
    model_flops_step = tokens_step * (fwd_tok_layers + fwd_tok_head) * train_mult \
        + vis["model_flops_step"]
    attn_share = attn_core / layer_fwd_dense
    rc_frac_layers = np.minimum(L.rc_layers * L.pp / dec.layers, 1.0)
    rc_extra = fl.recompute_extra_forward_fraction(L.rc, rc_frac_layers, attn_share)
    rc_extra = np.where(L.flash & (L.rc == 1), 0.0, rc_extra)   # flash: nothing extra to redo
    hw_flops_step = model_flops_step + tokens_step * fwd_tok_layers * rc_extra
    six_nd = fl.six_nd(P.active, tokens_step)

    # ---- 3. memory per GPU (first and last pipeline stage) ---------------------------------
    sb = model_state_bytes(job.precision, job.optimizer)
    w_b, g_b = sb.weights, prof.grad_bytes or sb.grads
    # busiest stage; uneven splits (Megatron --decoder-first/last-pipeline-num-layers) round up
    layers_stage = np.ceil(dec.layers / (L.pp * L.vp)) * L.vp
    layer_params = sp_.per_dense_layer if not moe_layers else sp_.per_moe_layer
    expert_params_layer = sp_.num_experts * sp_.expert
    nonexp_layer = layer_params - (expert_params_layer if moe_layers else 0)
    per_gpu_layer = nonexp_layer / L.tp + (expert_params_layer / (L.tp * L.ep) if moe_layers else 0.0)
    emb_gpu = sp_.embedding / L.tp
    head_gpu = (sp_.lm_head + sp_.final) / L.tp
    tied_extra = np.where(L.pp > 1, sp_.embedding / L.tp, 0.0) if dec.tied_embeddings else 0.0
    dec_first = layers_stage * per_gpu_layer + emb_gpu + np.where(L.pp == 1, head_gpu, 0.0)
    dec_last = layers_stage * per_gpu_layer + head_gpu + tied_extra \
        + np.where(L.pp == 1, emb_gpu, 0.0)
    vis_all = vis["params"] / L.tp                       # vision tower + projector: first stage
    vis_train = vis["trainable_params"] / L.tp
    on_last = np.where(L.pp == 1, 1.0, 0.0)
    first_params = dec_first + vis_all
    last_params = dec_last + vis_all * on_last
    # frozen weights are kept in the activation dtype (no master copy, no gradient)
    frozen_w = 2.0 if act_b == 2.0 else 4.0
    if lora:
        lora_p = lora_params(dec, job.lora_rank) / L.pp / L.tp
        trainable_first, trainable_last = lora_p, lora_p
    else:
        trainable_first = dec_first * trainable_frac_dec + vis_train
        trainable_last = dec_last * trainable_frac_dec + vis_train * on_last

    def states(total_p, train_p):
        w, g, o = mem.model_state_bytes_per_gpu(train_p, w_b, g_b, sb.master, sb.optim, L.dp,
                                                 L.zero, L.off_opt, L.off_par)
        frozen = (total_p - train_p) * frozen_w
        return w + frozen, g, o

    w1, g1, o1 = states(first_params, trainable_first)
    w2, g2, o2 = states(last_params, trainable_last)

    a_layer = mem.layer_activation_bytes(dec, s, L.mb, L.tp, L.sp & (L.tp > 1), L.rc, L.flash,
                                         dropout, act_b, moe_layer=bool(moe_layers), cp=L.cp)
    a_layer_none = mem.layer_activation_bytes(dec, s, L.mb, L.tp, L.sp & (L.tp > 1), 0, L.flash,
                                              dropout, act_b, moe_layer=bool(moe_layers), cp=L.cp)
    a_layer_full = mem.layer_activation_bytes(dec, s, L.mb, L.tp, L.sp & (L.tp > 1), 2, L.flash,
                                              dropout, act_b, moe_layer=bool(moe_layers), cp=L.cp)
    k_rc = np.minimum(L.rc_layers, layers_stage)
    stage_act = np.where(L.rc == 3, k_rc * a_layer_full + (layers_stage - k_rc) * a_layer_none,
                         layers_stage * a_layer)
    in_flight = mem.pipeline_in_flight(L.pp, L.vp, m)
    emb_act = mem.embedding_activation_bytes(dec, s, L.mb, L.tp, L.sp & (L.tp > 1), dropout,
                                             act_b, cp=L.cp)
    logits = mem.logits_bytes(dec, s, L.mb, L.tp, cp=L.cp, logits_fp32_copy=prof.logits_fp32)
    act1 = stage_act * in_flight + emb_act * in_flight + vis["act_bytes_per_mb"] * in_flight \
        + np.where(L.pp == 1, logits, 0.0)
    act2 = stage_act * 1.0 + logits
    # transient working set: the recomputed layer during its backward (full recompute), else
    # the largest intermediate of one layer (MLP hidden) and its gradient
    f_loc = (dec.ffn_hidden if not moe_layers else dec.moe.expert_ffn_hidden * dec.moe.top_k) / L.tp
    transient = np.where(L.rc >= 2, a_layer_none, 0.0) \
        + 2.0 * (s / L.cp) * L.mb * f_loc * act_b
    z3 = mem.zero3_gathered_bytes(per_gpu_layer, w_b, L.zero)
    # bucket buffers exist only when gradients are reduced across data-parallel ranks
    overhead = prof.fixed_bytes + z3 + np.where(L.dp > 1, prof.comm_buffer_bytes, 0.0)
    total1 = w1 + g1 + o1 + act1 + transient + overhead
    total2 = w2 + g2 + o2 + act2 + transient + overhead
    if prof.activations == "hf":
        # plain PyTorch + transformers: per-tensor activations and the step's two peaks (start
        # of backward without grads, optimizer step without activations), measured with
        # `trainplan measure memory` (costmodel/overheads.py, hf_step_memory)
        hfm = hf_step_memory(prof, dec, s / L.cp, L.mb, job.precision, L.flash, L.rc,
                             w1, g1, o1, sb, adamw=job.optimizer == "adamw",
                             n_layers=layers_stage,
                             extra_activations=vis["act_bytes_per_mb"] * in_flight)
        w1 = w2 = hfm["weights"]
        g1 = g2 = hfm["grads"]
        o1 = o2 = hfm["optimizer"]
        act1 = act2 = hfm["activations"]
        transient = hfm["transient"]
        total1 = total2 = hfm["total"] + overhead
    total1 = total1 * (1.0 + prof.fragmentation)
    total2 = total2 * (1.0 + prof.fragmentation)
    worst_first = total1 >= total2
    peak_mem = np.maximum(total1, total2)
    capacity = acc.hbm_gib * GiB
    fits = peak_mem <= capacity

    # ---- 4. time of one micro-batch on one stage -------------------------------------------
    T = L.mb * s / L.cp                                             # tokens per micro-batch/GPU
    n_mlp = 3 if dec.mlp == "swiglu" else 2

    km = tm.KernelModel(peak, eff, hbm_bps, act_b, prof.kernels_per_layer)
    gemm = km.gemm
    if moe_layers:
        ex_local = sp_.num_experts / L.ep
        t_ffn_moe = gemm(T * lin["moe_mlp"] / L.tp, n_mlp * np.maximum(ex_local, 1.0)) \
            + gemm(T * lin["router"])
    t_ffn_dense = gemm(T * lin["mlp"] / L.tp, n_mlp)
    sp_div = np.where(L.sp & (L.tp > 1), L.tp, 1.0)

    def layer_time(t_ffn):
        f, b, r, t_attn = km.layer(dec, lin, T, L.mb, s / L.cp, s, T * attn_core, L.tp, sp_div,
                                   L.flash, L.rc, rc_frac_layers, wgrad, 1.0, t_ffn, dropout)
        return f, b, r, t_attn

    f_d, b_d, r_d, t_attn_f = layer_time(t_ffn_dense)
    if moe_layers:
        f_m, b_m, r_m, _ = layer_time(t_ffn_moe)
        frac_moe = moe_layers / dec.layers
        t_layer_f = (1 - frac_moe) * f_d + frac_moe * f_m
        t_layer_b = (1 - frac_moe) * b_d + frac_moe * b_m
        t_layer_r = (1 - frac_moe) * r_d + frac_moe * r_m
    else:
        t_layer_f, t_layer_b, t_layer_r = f_d, b_d, r_d
    t_layer_compute = t_layer_f + t_layer_b + t_layer_r

    # tensor-parallel collectives: 2 in forward, 2 in backward (+2 when the forward is redone)
    intra_bw = (eff.intra_busbw_GBps or NCCL_RING_SHARE * cluster.link_GBps) * 1e9
    inter_bw = (eff.inter_busbw_GBps or NIC_BUSBW_SHARE * cluster.nic_GBps) * 1e9
    node = cluster.node_size

    def ctime(kind, size, n, stride):
        return coll.collective_time(kind, size, n, stride, node, intra_bw, inter_bw,
                                    eff.intra_latency_s, eff.inter_latency_s)

    tp_msg = T * dec.hidden * act_b
    # forward: 2 (+2 when the forward is redone); backward: 2, of which Megatron overlaps the
    # input-gradient all-reduce with the weight-gradient GEMM (async TP all-reduce, Narayanan
    # et al. 2021 sec. 4.2) -- the profile's tp_bwd_overlap share is hidden
    n_tp = 2.0 + 2.0 * (1.0 - prof.tp_bwd_overlap) \
        + np.where(L.rc == 2, 2.0, np.where(L.rc == 3, 2.0 * rc_frac_layers, 0.0))
    t_tp_layer = n_tp * ctime(coll.AR, tp_msg, L.tp, 1) * prof.tp_exposed
    # context parallel: ring exchange of K and V, cp-1 steps forward and backward (x2 for dK,dV)
    kv_bytes = T * 2.0 * dec.n_kv * dec.d_head / L.tp * act_b
    t_cp_comm = 3.0 * (L.cp - 1) * coll.p2p_time(kv_bytes, L.tp * L.cp > node, cluster.link_GBps,
                                                  cluster.nic_GBps, eff.intra_latency_s)
    t_cp_layer = np.maximum(t_cp_comm - (1.0 + tm.FLASH_BACKWARD_RATIO) * t_attn_f, 0.0)
    # expert parallel: dispatch + combine all-to-all, forward and backward
    if moe_layers:
        a2a_bytes = T * dec.moe.top_k * dec.hidden * act_b / L.tp
        t_ep_layer = 4.0 * ctime(coll.A2A, a2a_bytes, L.ep, L.tp * L.cp) * (moe_layers / dec.layers)
    else:
        t_ep_layer = 0.0
    t_layer = t_layer_compute + t_tp_layer + t_cp_layer + t_ep_layer

    # stage times per micro-batch (forward + backward)
    head_flops = T * fwd_tok_head / L.tp
    # + the loss over fp32 logits: write them, read for the softmax, write the gradient
    t_head = gemm(head_flops) * (2.0 + wgrad) + tm.memory_time(
        T * dec.vocab / L.tp * 4.0 * 3.0, hbm_bps, eff.hbm)
    t_first = layers_stage * t_layer + vis["time_per_mb"] + np.where(L.pp == 1, t_head, 0.0)
    t_last = layers_stage * t_layer + t_head + np.where(L.pp == 1, vis["time_per_mb"], 0.0)
    t_stage = np.maximum(t_first, t_last)

    # ---- 5. pipeline ----------------------------------------------------------------------
    t_compute = m * t_stage
    bubble = (L.pp - 1) / L.vp * t_stage                 # 1F1B: (p-1)/(v*m) of the ideal time
    # each TP rank sends its 1/t slice (sequence parallel, or Megatron's scatter/gather
    # optimisation, Narayanan et al. 2021 sec. 4.1)
    p2p_bytes = T * dec.hidden * act_b / L.tp
    pp_cross = L.tp * L.cp * L.dp >= node
    t_p2p = np.where(L.pp > 1, 2.0 * L.vp * m * coll.p2p_time(
        p2p_bytes, pp_cross, cluster.link_GBps, cluster.nic_GBps, eff.intra_latency_s), 0.0)

    # ---- 6. data-parallel gradient synchronisation -----------------------------------------
    p_sync = np.maximum(first_params, last_params)
    p_train = np.where(first_params >= last_params, trainable_first, trainable_last)
    dp_stride = L.tp * L.cp
    grad_msg = p_train * g_b
    param_msg = p_train * w_b
    t_ar = ctime(coll.AR, grad_msg, L.dp, dp_stride)
    t_rs = ctime(coll.RS, grad_msg, L.dp, dp_stride)
    t_ag = ctime(coll.AG, param_msg, L.dp, dp_stride)
    t_dp_comm = np.select([L.zero == 0, L.zero <= 2], [t_ar, t_rs + t_ag], default=t_rs)
    # overlapped with the backward of the last micro-batch; a tail stays exposed
    t_bwd_last = layers_stage * (t_layer_b + t_layer_r)
    hidden = np.minimum(t_dp_comm, t_bwd_last) * eff.dp_overlap
    t_dp = np.where(L.dp > 1, t_dp_comm - hidden, 0.0)
    # ZeRO-3: all-gather weights for forward and backward of every micro-batch (prefetched,
    # overlapped with compute), reduce-scatter of grads per micro-batch
    z3_comm = m * (2.0 * t_ag + t_rs)
    t_z3 = np.where((L.zero == 3) & (L.dp > 1),
                    np.maximum(z3_comm - eff.dp_overlap * t_compute, (1 - eff.dp_overlap) * z3_comm)
                    - t_dp, 0.0)
    t_z3 = np.maximum(t_z3, 0.0)

    # ---- 7. optimizer step ----------------------------------------------------------------
    p_opt = p_train / np.where(L.zero >= 1, L.dp, 1.0)
    opt_bytes = p_opt * (2.0 * (sb.master + sb.optim) + g_b + w_b)
    t_opt_gpu = tm.memory_time(opt_bytes, hbm_bps, eff.hbm)
    t_opt_cpu = p_opt / CPU_ADAM_PARAMS_PER_S + p_opt * (g_b + w_b) / (PCIE_GBPS * 1e9)
    t_opt = np.where(L.off_opt, t_opt_cpu, t_opt_gpu)
    t_offp = np.where(L.off_par, m * 2.0 * p_sync * w_b / (PCIE_GBPS * 1e9), 0.0)

    # ---- 8. step and run -------------------------------------------------------------------
    # loader workers prefetch while the GPUs compute: only decoding slower than the step shows
    t_data = exposed_data_time(vis["data_time_step"], t_compute + bubble)
    step = t_compute + bubble + t_p2p + t_dp + t_z3 + t_opt + t_offp + t_data
    pure = m * (t_stage - layers_stage * (t_tp_layer + t_cp_layer + t_ep_layer))
    mfu = model_flops_step / (step * n_gpus * peak)
    hfu = hw_flops_step / (step * n_gpus * peak)
    tps = tokens_step * job.packing_efficiency / step

    return dict(
        n_gpus=n_gpus, grad_accum=m, params_total=P.total, params_active=P.active,
        model_flops_step=model_flops_step, hardware_flops_step=hw_flops_step, six_nd_step=six_nd,
        mem_weights=np.where(worst_first, w1, w2), mem_grads=np.where(worst_first, g1, g2),
        mem_optimizer=np.where(worst_first, o1, o2),
        mem_activations=np.where(worst_first, act1, act2), mem_transient=transient,
        mem_overhead=overhead + np.where(worst_first, total1, total2) * prof.fragmentation
        / (1 + prof.fragmentation),
        mem_total=peak_mem, mem_first=total1, mem_last=total2, worst_first=worst_first,
        mem_capacity=capacity, fits=fits, logits_bytes=logits,
        t_compute=pure, t_tp=m * layers_stage * t_tp_layer, t_cp=m * layers_stage * t_cp_layer,
        t_ep=m * layers_stage * t_ep_layer, t_bubble=bubble, t_p2p=t_p2p, t_dp=t_dp + t_z3,
        t_optimizer=t_opt + t_offp, t_data=t_data, t_step=step, t_stage_mb=t_stage,
        mfu=mfu, hfu=hfu, tokens_per_s=tps, peak_flops=peak,
    )
