"""Cross-spec consistency checks (model x job x cluster x strategy), done once at the edge."""

from __future__ import annotations

from trainplan.errors import InputError
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def complete_strategy(model: Model, job: Job, cluster: Cluster, st: Strategy) -> Strategy:
    """Check a strategy against the model, job and cluster; derive dp. Raises InputError."""
    dec = model.decoder
    mp = st.tp * st.pp * st.cp
    if cluster.gpus % mp:
        raise InputError("strategy.tp*pp*cp", mp,
                         f"a divisor of the GPU count {cluster.gpus}")
    dp = st.dp or cluster.gpus // mp
    if st.dp and st.dp * mp != cluster.gpus:
        raise InputError("strategy.dp", st.dp,
                         f"gpus / (tp*pp*cp) = {cluster.gpus} / {mp} = {cluster.gpus // mp}")
    if dec.heads % st.tp:
        raise InputError("strategy.tp", st.tp,
                         f"a divisor of the attention heads {dec.heads}: {_divisors(dec.heads)}")
    if dec.n_kv % st.tp and st.tp % dec.n_kv:
        raise InputError("strategy.tp", st.tp,
                         f"a divisor or multiple of the KV heads {dec.n_kv}")
    if st.pp * st.vp > dec.layers:
        raise InputError("strategy.pp*vp", f"{st.pp}*{st.vp}", f"at most the decoder layers {dec.layers}")
    if dec.layers % (st.pp * st.vp) and not st.uneven_stages:
        raise InputError("strategy.pp*vp", f"{st.pp}*{st.vp}",
                         f"pp x vp must divide the decoder layers {dec.layers}: "
                         f"{_divisors(dec.layers)}", hint="or set uneven_stages = true")
    if job.seq_len % st.cp or (st.cp > 1 and job.seq_len % (2 * st.cp)):
        raise InputError("strategy.cp", st.cp,
                         f"cp such that seq_len {job.seq_len} divides by 2*cp (load-balanced ring)")
    if st.ep > 1:
        if not dec.moe:
            raise InputError("strategy.ep", st.ep, "1 for a dense model (EP needs MoE layers)")
        if dec.moe.num_experts % st.ep:
            raise InputError("strategy.ep", st.ep,
                             f"a divisor of the experts {dec.moe.num_experts}")
        if dp % st.ep:
            raise InputError("strategy.ep", st.ep, f"a divisor of dp = {dp}")
    if job.batch_sequences % (st.micro_batch * dp):
        ok = [mb for mb in _divisors(job.batch_sequences) if (job.batch_sequences // mb) % dp == 0]
        raise InputError(
            "job.global_batch", job.batch_sequences,
            f"a multiple of micro_batch x dp = {st.micro_batch} x {dp} = {st.micro_batch * dp}",
            hint=f"micro-batches that work with dp={dp}: {ok[:8]}" if ok else
            f"no micro-batch works: make the global batch a multiple of dp={dp}")
    if st.recompute == "layers" and st.recompute_layers > dec.layers // st.pp:
        raise InputError("strategy.recompute_layers", st.recompute_layers,
                         f"at most the layers per stage ({dec.layers // st.pp})")
    if st.vp > 1 and (job.batch_sequences // (st.micro_batch * dp)) % st.pp:
        raise InputError("strategy.vp", st.vp,
                         "1, or use a micro-batch count that is a multiple of pp "
                         "(Megatron's interleaved schedule requires it)")
    return st.model_copy(update={"dp": dp})
