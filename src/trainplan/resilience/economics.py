"""On-demand, reserved or spot: goodput, expected wall-clock and cost side by side.

Physics lives in ``trainplan.costmodel.reliability`` (Young/Daly interval, the complete
expected-time model with notices); this module gathers its inputs from a plan's Estimate and
from data: provider notice windows and interruption bands (``data/providers.json``, each with
its source) and dated prices (trainplan's price catalog, ``catalog/data/prices.json``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from trainplan.conventions import GiB
from trainplan.costmodel import reliability as rel
from trainplan.errors import InputError
from trainplan.contract import Numbers
from trainplan.costmodel.estimate import Estimate

HOURS_PER_MONTH = 730.0   # 8760 / 12


@lru_cache(maxsize=1)
def provider_data() -> dict[str, Any]:
    """The bundled provider table (notices, bands, failure rates, sources)."""
    text = resources.files("trainplan.resilience").joinpath("data/providers.json").read_text()
    return json.loads(text)


def provider(name: str) -> dict[str, Any]:
    provs = provider_data()["providers"]
    if name not in provs:
        raise InputError("provider", name, " | ".join(provs))
    return provs[name]


def failure_rate(name: str) -> float:
    """Published hardware failure rate per GPU-hour by key (see providers.json)."""
    rates = provider_data()["hardware_failure_rates"]
    if name not in rates:
        raise InputError("--failures", name, " | ".join(rates) + " or a rate per GPU-hour")
    return float(rates[name]["per_gpu_hour"])


def preempt_rate_per_hour(fraction_per_month: Numbers, instances: Numbers):
    """Job pre-emption rate from a monthly interruption fraction (AWS Spot Advisor style).

    A fraction f of instances interrupted within a month gives, for exponential lifetimes, a
    per-instance hazard -ln(1 - f) / 730 h; a job that stops when any of its ``instances``
    is reclaimed sees ``instances`` times that (independence: an assumption; reclaims are
    often correlated, which makes the job rate lower)."""
    f = np.asarray(fraction_per_month, dtype=float)
    if np.any((f < 0) | (f >= 1)):
        raise InputError("interruption fraction per month", float(np.max(f)), "0 <= f < 1")
    return np.asarray(instances, dtype=float) * -np.log1p(-f) / HOURS_PER_MONTH


@dataclass(frozen=True)
class Checkpoint:
    """Size and timing of one checkpoint of the plan's model states."""

    bytes_total: float       # unique bytes written (every shard once)
    bytes_read: float        # bytes all ranks read on restart (replicas read their own copy)
    write_s: float
    load_s: float
    writers: int             # nodes writing in parallel

    @property
    def gib(self) -> float:
        return self.bytes_total / GiB


def checkpoint_of(est: Estimate) -> Checkpoint:
    """The Estimate's checkpoint (``Estimate.checkpoint``, from ``costmodel/checkpoint.py``: the
    one formula ``estimate`` and ``plan`` totals use too): unique size, what a restart reads,
    the writing nodes and the write and load times at the cluster's storage bandwidth."""
    ck = est.checkpoint
    return Checkpoint(bytes_total=ck.gib * GiB, bytes_read=ck.read_gib * GiB, write_s=ck.write_s,
                      load_s=ck.load_s, writers=ck.writers)


@dataclass(frozen=True)
class Option:
    """One way to buy the GPUs."""

    name: str                        # on-demand, reserved, spot
    usd_per_gpu_hour: float | None
    price_source: str
    preempt_per_hour: float = 0.0    # job pre-emption rate
    notice_s: float = 0.0
    extra_restart_h: float = 0.0     # waiting for capacity after a pre-emption
    instance_gpus: int = 0           # GPUs one pre-emption takes away (an instance: a node)
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class OptionResult:
    option: Option
    interval_h: float        # checkpoint interval used (best for this option)
    daly_interval_h: float   # Daly 2006 for the option's unsaved interruptions
    goodput: float
    goodput_first_order: float
    wall_h: float
    cost_usd: float | None
    saves_on_notice: bool
    lead_s: float = 0.0      # what a save on notice needs (``checkpoint.notice_lead_seconds``)
    billed_gpu_hours: float = 0.0


def evaluate_option(opt: Option, work_h: float, gpus: int, failure_per_gpu_hour: float,
                    ck: Checkpoint, restart_h: float, step_s: float = 0.0) -> OptionResult:
    """Goodput, wall hours and cost of ``work_h`` useful hours bought as ``opt``.

    A notice saves the work only if it is at least the lead the save needs
    (``costmodel.checkpoint.notice_lead_seconds``: the rest of the step, the save in flight,
    the notice's save and a margin; the same lead the launch files give the save); otherwise a
    pre-emption loses the work like a failure (the lost partial step is neglected) but still
    waits for capacity (``reliability.mixed_restart_hours``). Cost: ``billed_gpu_hours``."""
    from trainplan.costmodel.checkpoint import notice_lead_seconds
    from trainplan.io.limits import check_range
    failure_per_gpu_hour = check_range("failures (per GPU-hour)", failure_per_gpu_hour, 0.0, 1.0)
    write_h = ck.write_s / 3600.0
    lead = float(notice_lead_seconds(ck.write_s, step_s))
    saves = opt.notice_s >= lead
    lam_hw = gpus * failure_per_gpu_hour
    lam_f = lam_hw + (0.0 if saves else opt.preempt_per_hour)
    lam_p = opt.preempt_per_hour if saves else 0.0
    rp = restart_h + opt.extra_restart_h
    r_f = restart_h if saves else float(rel.mixed_restart_hours(
        restart_h, lam_hw, rp, opt.preempt_per_hour, lam_f))
    g, tau = (float(x) for x in rel.best_goodput(write_h, r_f, lam_f, lam_p, rp))
    daly = float(rel.daly_interval_hours(write_h, min(1.0 / max(lam_f, 1e-12), 1e6)))
    m_all = 1.0 / (lam_f + lam_p) if lam_f + lam_p > 0 else math.inf
    g1, _ = rel.goodput(write_h, m_all, restart_h, daly)
    if not g > 0:
        raise InputError("failures", f"{lam_f + lam_p:.3g} interruptions per hour",
                         f"a rate at which {opt.name} ever finishes: with checkpoints of "
                         f"{ck.write_s:.0f} s and restarts of {restart_h * 60:.0f} min no work "
                         "survives between interruptions")
    wall = work_h / g
    billed = billed_gpu_hours(wall, gpus, opt.preempt_per_hour, opt.extra_restart_h,
                              opt.instance_gpus)
    cost = billed * opt.usd_per_gpu_hour if opt.usd_per_gpu_hour is not None else None
    return OptionResult(opt, tau, daly, g, float(g1), wall, cost, saves, lead, billed)


def billed_gpu_hours(wall_h: Numbers, gpus: Numbers, preempt_per_hour: Numbers, wait_h: Numbers,
                     instance_gpus: Numbers):
    """GPU-hours paid for a fixed-size job of ``gpus`` GPUs that takes ``wall_h`` hours.

    The job holds every GPU all along and pays for it, busy or idle (restarting, loading, and
    waiting for capacity), except the instance a pre-emption took: from the interruption until
    a replacement is found (``wait_h``) it is no longer the user's and is not billed (AWS EC2
    User Guide, "Billing for interrupted Spot Instances": an instance EC2 interrupts is charged
    for the seconds it ran; GCP and Azure Spot VMs are assumed billed the same way, per second
    of running). The job's other nodes stay allocated, idle, while it waits for the missing
    one: they are paid. Pre-emptions over the run: ``preempt_per_hour`` x ``wall_h`` (Poisson
    arrivals over the wall clock), ``instance_gpus`` each (the nodes one reclaim event takes:
    ``defaults.nodes_per_reclaim``); a second pre-emption during a wait is neglected
    (first order in rate x wait; the waits never add up to more than the wall time).
    Broadcasts."""
    wall = np.asarray(wall_h, dtype=float)
    waiting = np.minimum(np.asarray(preempt_per_hour, dtype=float) * wait_h, 1.0)
    return wall * gpus - wall * waiting * np.minimum(instance_gpus, gpus)


def break_even_discount(spot: OptionResult, on_demand: OptionResult) -> float:
    """Spot discount off the on-demand price at which both cost the same: cost = billed
    GPU-hours x price (``billed_gpu_hours``: the same work takes 1/goodput of the wall time,
    the nodes held are paid while restarting, the pre-empted instance is not while the job
    waits for capacity), so spot pays off when price_spot / price_od < B_od / B_spot, i.e.
    discount > 1 - B_od / B_spot. Degenerate case: a spot run billed nothing (a one-node job
    that only ever waits) has no break-even; reported as 0."""
    if not spot.billed_gpu_hours > 0:
        return 0.0
    return 1.0 - on_demand.billed_gpu_hours / spot.billed_gpu_hours


#: A catalog price this many months older than the provider's newest is flagged (an
#: assumption: a year).
STALE_MONTHS = 12


def catalog_options(gpu_id: str, provider_name: str, gpus_per_node: int, nodes: int,
                    band: float | None, spot_wait_h: float,
                    overrides: dict[str, float | None], *,
                    per_instance_hour: float | None = None, overcount: float = 1.0,
                    given: str = "") -> list[Option]:
    """On-demand, reserved and spot options for a GPU from the price catalog (the provider's
    rows; user prices in ``overrides`` win) and the provider's notice and pre-emption band.

    The spot rate: ``per_instance_hour`` (pre-emptions per instance-hour, ``given`` says how
    it was given) where set, else the fraction ``band`` of instances interrupted a month (else
    the provider's lowest band), converted per instance-hour (:func:`preempt_rate_per_hour`);
    the job sees reclaim events at ``defaults.job_preempt_rate`` (correlated reclaims:
    ``overcount``, 1 for independent nodes), each taking ``defaults.nodes_per_reclaim`` nodes."""
    from trainplan.resilience.defaults import job_preempt_rate, nodes_per_reclaim
    from trainplan.catalog.accelerators import prices_for

    prov = provider(provider_name)
    rows = [r for r in prices_for(gpu_id) if r.get("provider", "").lower() == provider_name]

    def month(r) -> int:                     # "2024-12 (...)" -> 2024 * 12 + 12
        import re
        m = re.match(r"(\d{4})-(\d{2})", str(r.get("as_of", "")))
        return int(m.group(1)) * 12 + int(m.group(2)) if m else 0
    newest = max((month(r) for r in rows), default=0)

    def pick(kind: str, key: str = "usd_per_gpu_hour"):
        for r in rows:
            if (r.get("kind") == kind or kind == "spot") and r.get(key) is not None:
                src = f"{r['provider']} {r.get('sku', '')} as of {r['as_of']}: {r['source']}"
                if month(r) and newest - month(r) > STALE_MONTHS:
                    src += (f" [over a year older than the catalog's newest {r['provider']} "
                            "price: check the current one, or pass it]")
                return float(r[key]), src
        return None, "not in the price catalog: pass a price"

    out = []
    for name, kind, key in (("on-demand", "on_demand", "usd_per_gpu_hour"),
                            ("reserved", "reservation", "usd_per_gpu_hour"),
                            ("spot", "spot", "usd_per_gpu_hour_spot")):
        price, src = pick(kind, key)
        if overrides.get(name) is not None:
            price, src = overrides[name], "user price"
        if name != "spot":
            out.append(Option(name, price, src))
            continue
        frac = band if band is not None else _band_default(prov)
        lam = per_instance_hour
        if lam is None and frac is not None:
            lam, given = float(preempt_rate_per_hour(frac, 1)), f"{frac:.0%} of instances a month"
        rate = job_preempt_rate(lam, nodes, overcount) if lam is not None else 0.0
        k = nodes_per_reclaim(nodes, overcount)
        note = (f"{given} ({lam:.3g} per instance-hour) x {nodes} nodes / {k:.3g} nodes per "
                "reclaim event (correlated reclaims)" if lam is not None
                else "no pre-emption rate: pass --interruptions")
        out.append(Option("spot", price, src, rate, float(prov["notice_s"]), spot_wait_h,
                          round(gpus_per_node * k),
                          (note, f"notice {prov['notice_s']} s: {prov['notice_source']}")))
    return out


def _band_default(prov: dict[str, Any]) -> float | None:
    """Upper edge of the lowest published band (AWS: <5% per month), or None."""
    bands = prov.get("bands_fraction_per_month")
    return bands[0][1] if bands else None
