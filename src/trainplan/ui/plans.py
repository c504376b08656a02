"""Layout searches run in the background, their progress polled by the page.

A search is :func:`trainplan.services.plan.run_plan` on the request
:func:`trainplan.services.plan.plan_request` builds from the same job sections as
``trainplan plan``'s flags (the page's layout knobs dropped: the search chooses them), with its
``progress(done, total)`` callback recording how far it is. The last few searches are kept in
memory (one process, one user or a small team); nothing is written to disk.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from trainplan.ui.state import State, job_data, workdir

KEEP = 16            # searches kept (the oldest finished one is dropped first)
RUNNING = 2          # searches running at once (each is a CPU-bound thread)
TOP = 10             # layouts in the ranking table


@dataclass
class Search:
    """One search: its state, progress, and result or error message."""

    state: State
    done: int = 0
    total: int = 0
    result: Any = None
    error: str | None = None
    finished: bool = False
    started: float = field(default_factory=time.monotonic)
    seconds: float | None = None            # the search's wall-clock once finished
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def elapsed(self) -> float:
        return self.seconds if self.seconds is not None else time.monotonic() - self.started

    @property
    def phase(self) -> str:
        """What the search is doing: the sweep reports after each chunk of candidates
        (search/sweep.py), so enumerating and the final ranking show as phases."""
        if self.finished:
            return "finished"
        if not self.total:
            return "enumerating layouts"
        return "evaluating layouts" if self.done < self.total else "ranking and refining"

    def progress(self, done: int, total: int) -> None:
        with self.lock:
            self.done, self.total = int(done), int(total)


_SEARCHES: dict[str, Search] = {}
_GUARD = threading.Lock()


def plan_args(state: State) -> list[str]:
    """The ``trainplan plan`` flags of the state (the command the benchmark and tests time)."""
    from trainplan.ui.state import PASTED, cli_args
    args = cli_args(State(**{**_plain(state), "gpus": "", **{k: "" for k in _knobs()}}),
                    PASTED if state.config.strip() else None)
    limits = [a for flag, v in (("--deadline-days", state.deadline_days),
                                ("--budget-usd", state.budget_usd)) if v for a in (flag, v)]
    return args + ["--gpus", state.plan_gpus, "--objective", state.objective, "--top", str(TOP),
                   *limits]


def _plain(state: State) -> dict[str, Any]:
    from dataclasses import fields
    return {f.name: getattr(state, f.name) for f in fields(state)}


def _knobs() -> tuple[str, ...]:
    from trainplan.ui.state import KNOBS
    return KNOBS


def run_search(state: State, search: Search) -> None:
    """Run the search of ``state`` into ``search`` (the thread's body; errors become its
    message, as the CLI would print them)."""
    from trainplan.services.jobfile import drop_strategy
    from trainplan.services.plan import plan_request, run_plan
    from trainplan.ui.compute import error_text
    try:
        with workdir(state) as tmp:
            data = job_data(State(**{**_plain(state), **{k: "" for k in _knobs()}}), tmp)
            data.get("cluster", {}).pop("gpus", None)
            drop_strategy(data)
            req = plan_request(data, gpu=[state.gpu] if state.gpu else None,
                               gpus=state.plan_gpus or None, objective=state.objective or None,
                               top=TOP, **limits(state))
            result, _ = run_plan(req, search.progress)
        search.result = result
    except Exception as exc:  # noqa: BLE001 -- trainplan's own errors are shown, others kept
        search.error = error_text(exc) or f"internal error: {type(exc).__name__}: {exc}"
    finally:
        search.seconds = time.monotonic() - search.started
        search.finished = True


def limits(state: State) -> dict[str, float | None]:
    """The search's deadline and budget (None where blank; a malformed one: InputError)."""
    from trainplan.ui.state import parse_value
    out: dict[str, float | None] = {}
    for k in ("deadline_days", "budget_usd"):
        text = getattr(state, k)
        out[k] = parse_value("--" + k.replace("_", "-"), "float", text) if text else None
    return out


def start(state: State, wait: bool = False) -> str:
    """Start a search of ``state`` in a thread; its id (``wait``: run it in this thread). More
    than :data:`RUNNING` at once: an InputError (the page shows it; the others go on)."""
    from trainplan.errors import InputError
    sid = uuid.uuid4().hex[:12]
    search = Search(state)
    with _GUARD:
        running = sum(not s.finished for s in _SEARCHES.values())
        if running >= RUNNING:
            raise InputError("search", state.plan_gpus, f"started when fewer than {RUNNING} "
                             "searches are running: wait for one to finish")
        finished = [k for k, s in _SEARCHES.items() if s.finished]
        while len(_SEARCHES) >= KEEP and finished:
            _SEARCHES.pop(finished.pop(0), None)
        _SEARCHES[sid] = search
    if wait:
        run_search(state, search)
    else:
        threading.Thread(target=run_search, args=(state, search), daemon=True,
                         name=f"trainplan-ui-plan-{sid}").start()
    return sid


def get(sid: str) -> Search | None:
    """The search of id ``sid`` (None when unknown or dropped)."""
    with _GUARD:
        return _SEARCHES.get(sid)


def rows(state: State, result: Any) -> list[dict[str, Any]]:
    """The ranking table's rows: each top layout with the state that loads it into the
    controls (its GPU type, count and strategy)."""
    out = []
    for i, (e, gid) in enumerate(zip(result.top, result.top_gpu_ids), 1):
        st = e.strategy
        load = state.with_layout(
            gpu=gid, gpus=e.gpus, tp=st["tp"], pp=st["pp"], vp=st["vp"], cp=st["cp"], ep=st["ep"],
            zero=st["zero"], micro_batch=st["micro_batch"], recompute=st["recompute"],
            recompute_layers=st["recompute_layers"] or None, sp=st["sequence_parallel"],
            offload_optimizer=st["offload_optimizer"],
            offload_activations=st["offload_activations"] or None,
            uneven_stages=st["uneven_stages"])
        out.append({"rank": i, "gpu": gid, "estimate": e, "query": load.query()})
    return out
