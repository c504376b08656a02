"""A dispatch-level live-storage tracker: peak bytes of live tensors, by category.

Every ATen operator call passes through :class:`MemTrace` (a ``TorchDispatchMode``). When an
operator returns a tensor whose *storage* has not been seen before, the tracker records the
storage's size and gives it a category; a weak reference on the storage removes it again when
PyTorch frees it. Views and in-place results share a known storage and cost nothing, exactly as
in the caching allocator. The live total is therefore the sum of ``nbytes`` over live storages,
the quantity ``torch.cuda.memory_allocated`` reports (before the allocator's 512-byte rounding),
and its maximum is the peak.

It works the same on real tensors and under ``FakeTensorMode`` (fake tensors carry a meta storage
with the right size), so a 70B model's step is traced on a laptop. The approach follows
``torch.distributed._tools.mem_tracker`` (PyTorch, 2.4+), which also keys storages by weak
reference; we keep our own because we need categories it does not have (autocast casts) and a
per-phase account of one training step.

Categories (a storage's category may change once: a gradient buffer is created as a backward
temporary and becomes a gradient when ``AccumulateGrad`` stores it):

``parameters``   model parameters and buffers (registered before the step)
``gradients``    ``param.grad`` storages
``optimizer_states``  tensors kept in ``optimizer.state`` (AdamW ``exp_avg``, ``exp_avg_sq``, step)
``activations``  created in the forward pass (and the loss) and still alive
``autocast_casts``  low-precision copies of parameters made by autocast (``aten._to_copy`` of a
                 parameter), in the forward or in a recomputed forward
``backward_temporaries``  created during backward (activation gradients, recomputed layers)
``optimizer_temporaries``  created during ``optimizer.step`` and not kept in its state
``inputs``       the batch (token ids, labels, pixels)
``other``        anything created outside a named phase
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

CATEGORIES = ("parameters", "gradients", "optimizer_states", "activations", "autocast_casts",
              "backward_temporaries", "optimizer_temporaries", "inputs", "other")

_PHASE_CATEGORY = {"forward": "activations", "backward": "backward_temporaries",
                   "optimizer": "optimizer_temporaries"}


@dataclass
class Peak:
    """The live bytes at the moment of a peak, by category, and where it happened."""

    total: int = 0
    by_category: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CATEGORIES})
    phase: str = ""
    op: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "phase": self.phase, "op": self.op, **self.by_category}


def _storage_of(t: Any):
    import torch
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):   # tensor subclasses without storage
        return None


class MemTrace:
    """Track live tensor storages and their peak, by category and by phase.

    Usage::

        tr = MemTrace()
        tr.register_module(model)            # parameters and buffers
        with tr:                              # installs the dispatch mode
            with tr.phase("forward"): loss = model(...).loss
            with tr.phase("backward"): loss.backward()
            with tr.phase("optimizer"): opt.step()
            tr.adopt_optimizer(opt)           # states -> optimizer_states
        tr.peak.total, tr.peak.by_category

    ``reset_peak()`` starts a new measurement window (e.g. the second step) without forgetting
    the live storages.
    """

    def __init__(self) -> None:
        self.live: dict[int, tuple[int, str]] = {}        # storage key -> (nbytes, category)
        self._refs: dict[int, Any] = {}
        self.current = 0
        self.by_category = {c: 0 for c in CATEGORIES}
        self.peak = Peak()
        self.phase_peaks: dict[str, Peak] = {}
        self._phase = ""
        self._mode = None
        self.ops_seen: dict[str, int] = {}

    # ---------------------------------------------------------------- bookkeeping
    def _add(self, st, category: str, op: str = "") -> None:
        key = st._cdata
        if key in self.live:
            return
        n = int(st.nbytes())
        self.live[key] = (n, category)

        def _gone(_ref, key=key, self_ref=weakref.ref(self)):  # noqa: B008 - bound per tensor, on purpose
            me = self_ref()
            if me is not None:
                me._remove(key)

        self._refs[key] = weakref.ref(st, _gone)
        self.current += n
        self.by_category[category] += n
        self._update_peak(op)

    def _remove(self, key: int) -> None:
        item = self.live.pop(key, None)
        self._refs.pop(key, None)
        if item is not None:
            n, cat = item
            self.current -= n
            self.by_category[cat] -= n

    def _update_peak(self, op: str) -> None:
        if self.current > self.peak.total:
            self.peak = Peak(self.current, dict(self.by_category), self._phase, op)
        pp = self.phase_peaks.get(self._phase)
        if pp is None or self.current > pp.total:
            self.phase_peaks[self._phase] = Peak(self.current, dict(self.by_category),
                                                 self._phase, op)

    def recategorise(self, tensors: Iterable[Any], category: str) -> None:
        """Give the storages of ``tensors`` a new category (registering unseen ones)."""
        for t in tensors:
            st = _storage_of(t)
            if st is None:
                continue
            key = st._cdata
            if key not in self.live:
                self._add(st, category)
                continue
            n, old = self.live[key]
            if old != category:
                self.live[key] = (n, category)
                self.by_category[old] -= n
                self.by_category[category] += n

    def category_of(self, t: Any) -> str | None:
        st = _storage_of(t)
        if st is None:
            return None
        item = self.live.get(st._cdata)
        return item[1] if item else None

    # ---------------------------------------------------------------- registration
    def register(self, tensors: Iterable[Any], category: str) -> None:
        for t in tensors:
            st = _storage_of(t)
            if st is not None:
                self._add(st, category)

    def register_module(self, module: Any) -> None:
        """Parameters and buffers as ``parameters``; grads already present as ``gradients``;
        a hook moves each new ``param.grad`` to ``gradients`` when it is accumulated."""
        self.register(module.parameters(), "parameters")
        self.register(module.buffers(), "parameters")
        for p in module.parameters():
            if p.grad is not None:
                self.recategorise([p.grad], "gradients")
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._grad_hook)

    def _grad_hook(self, p: Any) -> None:
        if p.grad is not None:
            self.recategorise([p.grad], "gradients")

    def adopt_optimizer(self, optimizer: Any) -> None:
        """Move the tensors kept in ``optimizer.state`` to ``optimizer_states``."""
        ts = [v for st in optimizer.state.values() for v in st.values()
              if hasattr(v, "untyped_storage")]
        self.recategorise(ts, "optimizer_states")

    # ---------------------------------------------------------------- windows and phases
    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        prev, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = prev

    def snapshot(self, label: str) -> Peak:
        """The live bytes now, by category (e.g. at the end of the forward pass)."""
        return Peak(self.current, dict(self.by_category), self._phase, label)

    def reset_peak(self) -> None:
        self.peak = Peak(self.current, dict(self.by_category), self._phase, "reset")
        self.phase_peaks = {}

    # ---------------------------------------------------------------- the dispatch mode
    def _on_op(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        import torch
        from torch.utils._pytree import tree_flatten
        name = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else str(func)
        self.ops_seen[name] = self.ops_seen.get(name, 0) + 1
        outs, _ = tree_flatten(out)
        if not any(isinstance(o, torch.Tensor) for o in outs):
            return
        cat = _PHASE_CATEGORY.get(self._phase, "other")
        if name == "_to_copy" and self._phase in ("forward", "backward"):
            src = args[0] if args else None
            if self.category_of(src) == "parameters":
                cat = "autocast_casts"
        for o in outs:
            st = _storage_of(o)
            if st is not None:
                self._add(st, cat, name)

    def __enter__(self) -> "MemTrace":
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker._on_op(func, args, kwargs, out)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None
