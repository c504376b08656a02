"""From a parameter count to a dense decoder architecture that ``trainplan plan`` takes.

The shapes follow published dense decoder families (numbers from their released configs):

* **Aspect ratio hidden / layers ~ 128.** Llama 3 8B: 4096 / 32 = 128; Llama 3 405B:
  16384 / 126 = 130 (Llama 3 Herd paper, arXiv:2407.21783, Table 3). Llama 3 70B and Chinchilla
  70B both use 8192 / 80 = 102 (Hoffmann et al. 2022, arXiv:2203.15556, Table 4). Kaplan et al.
  2020 (arXiv:2001.08361) §3.1 / Fig. 5 find the loss changes by only a few per cent for aspect
  ratios between about 20 and 200, so the target (:data:`TARGET_ASPECT`) is a convention, not an
  optimum.
* **Layers a multiple of 4 from 24 up** (Llama 3 8B 32, 70B 80, Chinchilla 80), so that 2- and
  4-stage pipelines split the model evenly: a convenience.
* **Head dimension 128** (Llama 3 8B/70B/405B, Chinchilla: 128) and **8 KV heads** (grouped-query
  attention, Llama 3 Table 3) whenever the head count allows; 64 below 1,024 hidden (GPT-2 small,
  Radford et al. 2019; Llama 3.2 1B config).
* **SwiGLU FFN of 3.5 x hidden** (Llama 3 8B: 14336 = 3.5 x 4096; 70B: 28672 = 3.5 x 8192),
  rounded to a multiple of 256.
* **Vocabulary 128,256** (Llama 3), or **32,000** (Llama 2, Touvron et al. 2023,
  arXiv:2307.09288; Chinchilla's 32K SentencePiece) when the large vocabulary would put more than
  :data:`MAX_EMBEDDING_SHARE` of the parameters into the (untied) embeddings.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


#: Target hidden / layers (Llama 3 8B 128, 405B 130; 70B and Chinchilla 102; see module doc).
TARGET_ASPECT = 128.0
#: SwiGLU FFN width over hidden (Llama 3 8B and 70B configs: 3.5).
FFN_RATIO = 3.5
#: Llama 3's vocabulary (tokenizer of 128,256 entries) and Llama 2 / Chinchilla's 32,000.
LARGE_VOCAB, SMALL_VOCAB = 128_256, 32_000
#: Largest share of parameters in the embeddings before the small vocabulary is used: an
#: assumption (Llama 3 8B has 13%: 2 x 128256 x 4096 / 8.03e9).
MAX_EMBEDDING_SHARE = 0.20
#: Accept a shape whose exact parameter count is within this fraction of the target.
TOLERANCE = 0.03

SOURCES = ("Llama 3 (arXiv:2407.21783 Table 3 and configs: hidden/layers 128-130, head dim 128, "
           "8 KV heads, FFN 3.5x); Chinchilla (arXiv:2203.15556 Table 4: 8192/80); "
           "Kaplan et al. 2020 Fig. 5 (aspect ratio 20-200 within a few %)")


@dataclass(frozen=True)
class Architecture:
    """A proposed dense decoder: its shape and exact parameter count."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    n_params: float
    target_params: float
    aspect_ratio: float
    source: str = SOURCES
    non_embedding_target: bool = False     # the target counts no embeddings (Kaplan's N)

    @property
    def non_embedding_params(self) -> float:
        """Parameters without the input embedding and the (untied) LM head."""
        return self.n_params - _counts(self.hidden, self.vocab)[2]

    @property
    def matched_params(self) -> float:
        """The count compared with the target: non-embedding where the target is."""
        return self.non_embedding_params if self.non_embedding_target else self.n_params

    def stack(self) -> dict[str, Any]:
        """The ``[[model.stacks]]`` table (the keys of :class:`trainplan.spec.model.Stack`)."""
        return dict(name="decoder", layers=self.layers, hidden=self.hidden, heads=self.heads,
                    kv_heads=self.kv_heads, head_dim=self.head_dim, ffn_hidden=self.ffn_hidden,
                    vocab=self.vocab)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _heads(hidden: int) -> tuple[int, int, int]:
    """(heads, kv_heads, head_dim) for ``hidden``: 128-wide heads (64 below 1,024), 8 KV heads
    when the head count is a multiple of 8, else 4, else full multi-head attention."""
    head_dim = 128 if hidden >= 1024 else 64
    heads = hidden // head_dim
    kv = 8 if heads % 8 == 0 else (4 if heads % 4 == 0 else heads)
    return heads, kv, head_dim


def _widths():
    """Candidate hidden sizes: steps of 128 to 2,048, 256 to 8,192, 1,024 beyond (Llama 3 widths
    4096, 8192, 16384 are all on this grid)."""
    h = 256
    while h <= 65536:
        yield h
        h += 128 if h < 2048 else (256 if h < 8192 else 1024)


def _counts(hidden: int, vocab: int) -> tuple[float, float, float]:
    """(parameters per layer, parameters outside the layers, of which the token embedding and
    LM head) from the cost model's own counter (:func:`trainplan.costmodel.params.stack_params`),
    so the proposal agrees with ``plan``."""
    from trainplan.costmodel.params import stack_params
    from trainplan.spec.model import Stack

    heads, kv, hd = _heads(hidden)
    ffn = int(round(FFN_RATIO * hidden / 256.0)) * 256
    one = stack_params(Stack(layers=1, hidden=hidden, heads=heads, kv_heads=kv, head_dim=hd,
                             ffn_hidden=ffn, vocab=vocab))
    return (float(one.per_dense_layer), float(one.total - one.per_dense_layer),
            float(one.embedding + one.lm_head))


def _best(n_params: float, vocab: int, non_embedding: bool = False) -> Architecture:
    cands = []
    for h in _widths():
        per, rest, embeddings = _counts(h, vocab)
        emb = embeddings if non_embedding else 0.0    # the target leaves them out
        layers = max(1, int(round((n_params + emb - rest) / per)))
        if layers >= 24:  # a multiple of 4, so that 2- and 4-stage pipelines split it evenly
            layers = int(round(layers / 4.0)) * 4
        total = rest + layers * per
        err = abs((total - emb) / n_params - 1.0)
        cands.append((err, abs(math.log((h / layers) / TARGET_ASPECT)), h, layers, total))
        if rest > n_params * 2:
            break
    close = [c for c in cands if c[0] <= TOLERANCE]
    err, _, h, layers, total = min(close, key=lambda c: (c[1], c[0])) if close else min(cands)
    heads, kv, hd = _heads(h)
    return Architecture(layers=layers, hidden=h, heads=heads, kv_heads=kv, head_dim=hd,
                        ffn_hidden=int(round(FFN_RATIO * h / 256.0)) * 256, vocab=vocab,
                        n_params=total, target_params=n_params, aspect_ratio=h / layers,
                        non_embedding_target=non_embedding)


def propose_architecture(n_params: float, vocab: int | None = None,
                         non_embedding: bool = False) -> Architecture:
    """A Llama-3-shaped dense decoder of about ``n_params`` parameters (see the module doc for
    each ratio's source); ``non_embedding``: ``n_params`` counts no embeddings (Kaplan et al.
    2020 sec. 1.2's N), so the embedding and LM head come on top. ``vocab`` fixes the
    vocabulary; default: 128,256, or 32,000 when the embeddings would exceed
    :data:`MAX_EMBEDDING_SHARE` of the parameters."""
    from trainplan.io.limits import PARAMS_RANGE, check_int, check_range
    n = check_range("n_params", n_params, *PARAMS_RANGE)
    if vocab is not None:
        return _best(n, check_int("vocab", vocab, 1, 2**24), non_embedding)
    a = _best(n, LARGE_VOCAB, non_embedding)
    if 2.0 * LARGE_VOCAB * a.hidden > MAX_EMBEDDING_SHARE * a.n_params:
        a = _best(n, SMALL_VOCAB, non_embedding)
    return a


def job_file_text(arch: Architecture, tokens: float, *, gpu: str | None = None, gpus: int | None = None,
                  law: str = "", seq_len: int = 4096, global_batch: int | None = None,
                  precision: str = "bf16_mixed") -> str:
    """A job file (TOML) with the proposed model as an inline stack, ``tokens`` training tokens
    and, when known, the cluster; ``trainplan plan FILE`` reads it (:func:`trainplan.services.jobfile._model`)."""
    from trainplan.io.formats import comment, toml_dumps

    name = f"scale-proposal-{arch.n_params / 1e9:.3g}B"
    head = [
        comment(f"Proposed by `trainplan scale`{' under ' + law if law else ''}: "
                f"{arch.n_params:.4g} parameters for a target of {arch.target_params:.4g}, "
                f"trained on {float(tokens):.4g} tokens."),
        comment("Shapes: " + SOURCES),
    ]
    tables: dict[str, Any] = {
        "model": {"name": name, "source": f"trainplan scale ({law or 'scaling law'})",
                  "stacks": [{k: v if isinstance(v, str) else int(v) for k, v in arch.stack().items()}]},
        "job": {"seq_len": int(seq_len), "tokens": float(f"{float(tokens):.6g}"),
                "precision": precision, "optimizer": "adamw"},
    }
    if global_batch:            # the batch the budget's MFU was found at
        tables["job"]["global_batch"] = int(global_batch)
    if gpu or gpus:
        tables["cluster"] = {k: v for k, v in (("gpu", str(gpu) if gpu else None),
                                               ("gpus", int(gpus) if gpus else None)) if v}
    # the budget's MFU was found with uneven pipeline stages open (search.best_mfu)
    tables["search"] = {"uneven_stages": True}
    return "\n".join(head) + "\n" + toml_dumps(tables)
