"""The whole cost model for (model, job, cluster) and one or many layouts, on one page.

``evaluate`` reads like the math: parameters -> FLOPs -> memory of the first and last pipeline
stage -> per-layer time -> pipeline -> communication -> optimizer -> step. Each line calls a
named, sourced function in the module of its concern; the framework (``job.framework``, a data
file in ``catalog/data/frameworks.json``) and the accelerator are data, not branches. Layout
fields may be Python numbers (one strategy) or numpy arrays of equal length (the search): the
same code serves both, so the search has no cost formulas of its own.
"""

from __future__ import annotations

import numpy as np

from trainplan.spec.framework import get_framework
from trainplan.conventions import ACTIVATION_BYTES, GiB, MATMUL_DTYPE, model_state_bytes
from trainplan.costmodel import activations as ac
from trainplan.costmodel import comm, compute, offload, pipeline
from trainplan.costmodel import flops as fl
from trainplan.costmodel import memory as mem
from trainplan.costmodel import optimizer as opt
from trainplan.costmodel import states as stt
from trainplan.costmodel import zero3
from trainplan.costmodel.calibration import calibrated_step
from trainplan.costmodel.layout import Layout
from trainplan.costmodel.params import layer_walk_shares as walk_shares, model_params
from trainplan.costmodel.result import Evaluation
from trainplan.costmodel.vision import exposed_data_time, vision_costs

__all__ = ["Layout", "evaluate"]


def evaluate(model, job, cluster, L: Layout) -> Evaluation:
    """Everything the physics concludes for the layouts in ``L``; arrays broadcast."""
    fw, acc, dec = get_framework(job.framework).with_cp(job.cp_comm_type), cluster.accelerator, model.decoder
    act_b, sb = ACTIVATION_BYTES[job.precision], model_state_bytes(job.precision, job.optimizer)
    g_b = fw.grad_bytes_for(job.precision, sb.grads, job.main_grads_fp32)
    dropout, m, layers = job.dropout, L.micro_batches(job.batch_sequences), L.layers_per_stage(dec.layers)
    vis = vision_costs(model, job, L, cluster)
    P = model_params(model)
    # ---- FLOPs per step
    model_f, hw_f, wgrad, rc_frac = fl.step_flops(model, job, L, vis["model_flops_step"])
    # ---- memory per GPU: the first and the last pipeline stage, the same functions twice
    p1, p2 = (stt.stage_params(model, job, L, vis, first) for first in (True, False))
    q_b = job.base_weight_bytes_at(dec.hidden)                  # a quantized base (QLoRA)
    s1, s2 = (stt.stage_state_bytes(p, sb, g_b, fw, L, act_b, q_b) for p in (p1, p2))
    sets = ac.layer_sets(dec, job, fw, L, dropout, act_b)     # one layer, shared by both stages
    a1, a2 = (ac.stage_activations(dec, job, fw, L, vis, sets, f) for f in (True, False))
    z3 = mem.zero3_gathered_bytes(fw.zero3_prefetch_layers * stt.layer_weight_bytes(
        p1.layer, p1.layer_quantized, sb.weights, q_b), 1.0, L.zero, 1.0)
    overhead = fw.fixed_gib * GiB + z3 + np.where(L.dp > 1, fw.comm_buffer_bytes, 0.0)
    if fw.activations == "hf":      # plain PyTorch + transformers: measured per-tensor accounting
        m1 = m2 = ac.hf_stage_memory(fw, dec, job, L, s1, sb, layers, vis, overhead)
    else:
        m1, m2 = (ac.stage_memory(s, a, ac.optimizer_temp_bytes(fw, job, sb, s.optimizer),
                                  overhead, fw) for s, a in ((s1, a1), (s2, a2)))
    worst_first = m1.total >= m2.total
    worst = lambda k: np.where(worst_first, getattr(m1, k), getattr(m2, k))  # noqa: E731
    capacity = acc.hbm_gib * GiB
    host_node = np.maximum(s1.host + a1.host, s2.host + a2.host) * np.minimum(L.n_gpus, cluster.node_size)
    # ---- time of one micro-batch on the busiest stage
    km, net = compute.KernelModel(cluster, job, fw), comm.Net(cluster, L.n_gpus)
    lt = compute.layer_time(km, dec, job, L, wgrad, rc_frac)
    T = L.mb * job.seq_len / L.cp
    moe_share = (dec.layers - dec.moe.dense_layers) / dec.layers if dec.moe else 0.0
    t_tp = compute_tp = comm.tp_layer_time(net, fw, dec, T, act_b, L, rc_frac, job.tp_comm_overlap)
    t_cp = comm.cp_layer_time(net, fw, dec, T, act_b, L, lt.attention, rc_frac)
    t_ep = comm.ep_layer_time(net, dec, T, act_b, L, moe_share, rc_frac)
    t_layer = lt.total + compute_tp + t_cp + t_ep
    t_head = compute.head_time(km, dec, L, T, wgrad, ac.logits_fp32(fw, job))
    step_kind = (job.optimizer, ac.adamw_impl(fw, job), bool(job.grad_clip))   # opt.step_bytes
    host = opt.host_rates(acc.efficiency, opt.host_optimizer(fw.cpu_optimizer, step_kind[1]), acc.host_link_GBps)
    t_off = offload.activation_offload_time(L.off_act, layers, a1.offload_set,
                                            lt.forward, lt.backward + lt.recompute, host[1], fw.activation_offload)
    t_stage = pipeline.stage_time(L, dec.layers, t_layer, vis["time_per_mb"], t_head) + t_off
    # ---- pipeline, data parallelism, optimizer, data loading
    t_compute = m * t_stage
    bubble = pipeline.bubble_time(L.pp, L.vp, t_stage)
    t_p2p = pipeline.p2p_time(net, L, m, T, dec.hidden, act_b, net.node, t_stage, fw.p2p_overlap_interleaved)
    group = L.shard_group(fw.optimizer_shard == "dp_cp")
    p_sync, p_layer, p_opt = stt.data_parallel_params(p1, p2, L, group)
    regather, cold = zero3.release_pattern(dec, L, rc_frac, fw, job)
    dp = comm.dp_time(net, fw, L, p_sync, p_layer, layers, m, sb.weights, g_b,
                      lt.forward, lt.backward + lt.recompute, regather,
                      stt.layer_weight_bytes(p_layer, p1.layer_quantized, sb.weights, q_b), cold, walk_shares(dec))
    t_dp = dp.exposed + fw.overlap_slowdown * dp.hidden
    t_opt = opt.optimizer_time(p_opt, sb, g_b, sb.weights, acc.hbm_bw_tbps * 1e12,
                               acc.efficiency.hbm, L.off_opt, fw.offload_grad_bytes, host, step_kind) \
        + opt.param_offload_time(m, np.maximum(p1.total, p2.total) / group, sb.weights,
                                 L.off_par, host[1]) \
        + compute.fp8_step_time(km, net, L, layers * p1.layer, m)
    t_data = exposed_data_time(vis["data_time_step"], t_compute + bubble)
    step = t_compute + bubble + t_p2p + t_dp + t_opt + t_data
    pure = m * (t_stage - t_off - layers * (t_tp + t_cp + t_ep))
    pure, c, step = calibrated_step(pure, model_f / hw_f, step, fw.step_factors)  # a team's own
    n_gpus, peak = L.n_gpus, acc.peak(MATMUL_DTYPE[job.precision])
    return Evaluation(
        n_gpus=n_gpus, grad_accum=m, params_total=P.total, params_active=P.active,
        model_flops_step=model_f, hardware_flops_step=hw_f,
        six_nd_step=fl.six_nd(P.active, job.batch_tokens),
        mem_weights=worst("weights"), mem_grads=worst("grads"), mem_optimizer=worst("optimizer"),
        mem_activations=worst("activations"), mem_transient=worst("transient"),
        mem_overhead=worst("overhead"), mem_total=np.maximum(m1.total, m2.total),
        mem_phase=worst("phase"), mem_step_temp=worst("step_temp"),
        mem_first=m1.total, mem_last=m2.total, worst_first=worst_first, mem_capacity=capacity,
        mem_host_node=host_node, logits_bytes=a2.logits,
        fits=(np.maximum(m1.total, m2.total) <= capacity) & (host_node <= cluster.host_bytes),
        t_compute=pure, t_tp=c * m * layers * t_tp, t_cp=c * m * layers * t_cp,
        t_ep=c * m * layers * t_ep, t_bubble=c * bubble, t_p2p=c * t_p2p, t_dp=c * t_dp,
        t_optimizer=c * t_opt, t_data=c * t_data, t_offload=c * m * t_off, t_step=step, t_stage_mb=t_stage,
        mfu=model_f / (step * n_gpus * peak), hfu=hw_f / (step * n_gpus * peak),
        tokens_per_s=job.batch_tokens * job.packing_efficiency / step, peak_flops=peak)
