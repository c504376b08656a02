"""FLOPs of the vision side of a vision-language model, per image and by training stage.

* **forward**: the tower is a transformer with *non-causal* attention over one image's tokens (each
  image attends only to itself, also in Qwen2-VL's packed variable-length batches), plus its patch
  embedding; the projector adds its own matmuls. Image tokens inside the decoder are already in the
  decoder's ``seq_len`` and so in its own count (science.md row 3c: count the tower explicitly
  instead of a "+20% cross-modal overhead").
* **training stages**: a frozen part gets no weight gradients (no weight-gradient FLOPs, no grads,
  no optimizer states), but activation gradients still flow through it when anything *below* it
  is trainable, and then its activations are kept for the backward. The tower sits at the bottom,
  so a frozen tower runs its forward only and keeps nothing; a trainable projector above it keeps
  its own input (the tower's output). Multipliers of the forward: weight grads 1 and input grads 1
  (Kaplan et al. 2020 sec. 2.1: backward = 2x forward).

:func:`vision_parts` walks the towers and projectors bottom up as the job trains them; the
cost page (:func:`trainplan.costmodel.vision.vision_costs`) and :func:`tower_equivalent_decoder_layers`
both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from trainplan.costmodel.flops import (
    attention_core_flops_per_token,
    layer_forward_flops_per_token,
    lm_head_flops_per_token,
    stack_forward_flops_per_token,
)
from trainplan.costmodel.vision_attention import attention_keys
from trainplan.costmodel.vision_projectors import (
    MERGING_KINDS,
    merging_first_matmul_share,
    merging_forward_flops,
)
from trainplan.costmodel.vision_tokens import (
    encoder_patches,
    images_per_sequence,
    projector_tokens_out,
    tower_inputs,
    weighted_mean,
)
from trainplan.spec.model import Model, Projector, Stack

# ------------------------------------------------------------------------------------- forward


def patch_embedding_flops(stack: Stack, n_patches):
    """Forward FLOPs of the patch embedding: a (C*t*p*p) x h matmul per patch, 2 FLOPs per MAC.

    A fixed position table resized to each image (SigLIP2, ``position_entries`` rows) adds the
    resize, which transformers 5 runs as one dense matmul of the bilinear weights (n x P) with the
    table (P x h): 2*n*P*h (``modeling_siglip2.py``, ``resize_positional_embeddings``). Like the
    patch matmul it needs no input gradient, only the table's.
    """
    n = np.asarray(n_patches, dtype=float)
    resize = 2.0 * stack.position_entries * stack.hidden * n if stack.position == "learned" else 0.0
    return 2.0 * stack.channels * stack.temporal_patch * stack.patch_size ** 2 * stack.hidden * n \
        + resize


def pool_head_flops(stack: Stack, n_tokens):
    """Forward FLOPs of SigLIP's attention-pooling head (``SiglipMultiheadAttentionPoolingHead``)
    on one image: k and v projections 4*h*h*n, the probe's q and the out projection 4*h*h,
    one query's scores and values 4*h*n, MLP 4*h*f (one token)."""
    if not stack.pool_head:
        return 0.0
    h, n = stack.hidden, np.asarray(n_tokens, dtype=float)
    return 4.0 * h * h * n + 4.0 * h * h + 4.0 * h * n + 4.0 * h * stack.ffn_hidden


def tower_forward_flops_per_image(stack: Stack, height=None, width=None):
    """Forward FLOPs of the encoder on one image: patch embedding + all layers over its tokens.

    Per layer and token: q, k, v, out and MLP matmuls plus non-causal attention 4*a*d*keys
    (:func:`trainplan.costmodel.flops.stack_forward_flops_per_token`), where keys are all the
    image's tokens in a full-attention layer and the window's in a windowed one (Qwen2.5-VL;
    :func:`trainplan.costmodel.vision_attention.attention_keys`). CLIP ViT-L/14 at 224 px:
    162.2 GFLOP = 81.1 GMACs, as OpenCLIP's ``arch_info.csv`` (81.08 GMACs; science.md row 3c).
    """
    n = encoder_patches(stack, height, width)
    tok = n + (1 if stack.class_token else 0)
    f = stack_forward_flops_per_token(stack, tok, causal=False) * tok
    for layers, keys in attention_keys(stack, height, width)[1:]:   # windowed layers
        f = f + layers * tok * (attention_core_flops_per_token(stack, keys, False)
                                - attention_core_flops_per_token(stack, tok, False))
    return f + patch_embedding_flops(stack, n) + pool_head_flops(stack, tok)


def projector_forward_flops(p: Projector, n_in):
    """Forward FLOPs of a projector on one image with ``n_in`` input tokens (2 FLOPs per MAC).

    linear: 2*in*out*n. mlp2: 2*(in*hid + hid*out)*n. merge_mlp, shuffle_mlp, shuffle_linear,
    pool_linear: :func:`trainplan.costmodel.vision_projectors.merging_forward_flops`. resampler (Qwen-VL, one cross-attention of
    Q queries over n keys at width d): kv projection 2*in*d*n, k and v 4*d*d*n, q and out 4*d*d*Q,
    scores and values 4*Q*n*d.
    """
    n = np.asarray(n_in, dtype=float)
    if p.kind in MERGING_KINDS:
        return merging_forward_flops(p, n_in)
    if p.kind == "linear":
        return 2.0 * p.in_dim * p.out_dim * n
    if p.kind == "mlp2":
        hid = p.hidden or p.out_dim
        return 2.0 * (p.in_dim * hid + hid * p.out_dim) * n
    d, q = p.out_dim, p.queries
    return 2.0 * p.in_dim * d * n + 4.0 * d * d * n + 4.0 * d * d * q + 4.0 * q * n * d


# ------------------------------------------------------------------------------------- stages


def projector_name(i: int, n: int) -> str:
    """Name of projector i for ``job.frozen``: 'projector' if there is one, else 'projector{i}'."""
    return "projector" if n == 1 else f"projector{i}"


def trainable_parts(model: Model, job) -> dict[str, bool]:
    """Which vision-side parts get weight gradients.

    A tower is frozen when its name is in ``job.frozen``; projectors when their name or
    'projector' is (stage 1: frozen = ["vision", "decoder"]; stage 2: frozen = ["vision"]).
    """
    out = {v.name: v.name not in job.frozen for v in model.vision}
    n = len(model.projectors)
    for i in range(n):
        name = projector_name(i, n)
        out[name] = name not in job.frozen and "projector" not in job.frozen
    return out


def full_under_lora(job, name: str) -> bool:
    """Whether a vision part is trained in full beside LoRA adapters (``job.trained_in_full``;
    'projector' names every projector)."""
    full = getattr(job, "trained_in_full", ())
    return name in full or (name.startswith("projector") and "projector" in full)


def backward_multipliers(trainable: bool, below_trainable: bool) -> tuple[float, float]:
    """(weight-grad, input-grad) FLOPs as multiples of the forward (Kaplan et al. 2020 sec. 2.1).

    Weight gradients only for trainable parts; input gradients where something below is trainable
    or the part itself is (its lower matmuls need the gradient of their output). A part's *first*
    matmul needs no input gradient when nothing below it is trainable: see
    :func:`first_matmul_share`.
    """
    return (1.0 if trainable else 0.0), (1.0 if (trainable or below_trainable) else 0.0)


def first_matmul_share(p: Projector) -> float:
    """Share of a projector's forward FLOPs in its first matmul (no input gradient needed there
    when nothing below is trainable): linear 1; mlp2 in/(in + out); merge_mlp m/(m + out);
    resampler the kv projection, in/(in + 2d) of the per-patch work (queries ignored)."""
    if p.kind == "linear":
        return 1.0
    if p.kind == "mlp2":
        hid = p.hidden or p.out_dim
        return p.in_dim * hid / (p.in_dim * hid + hid * p.out_dim)
    if p.kind in MERGING_KINDS:
        return merging_first_matmul_share(p)
    return p.in_dim / (p.in_dim + 2.0 * p.out_dim)


def projector_train_flops(p: Projector, n_in, trainable: bool, below_trainable: bool):
    """Training FLOPs of a projector per image: forward, weight grads if trainable, input grads
    except through its first matmul when nothing below is trainable."""
    fwd = projector_forward_flops(p, n_in)
    wg, ig = backward_multipliers(trainable, below_trainable)
    if ig and not below_trainable:
        ig = 1.0 - first_matmul_share(p)
    return fwd * (1.0 + wg + ig)


def tower_train_flops_per_image(stack: Stack, trainable: bool, height=None, width=None):
    """Training FLOPs of a tower per image: forward only if frozen (nothing sits below it);
    trainable: 3x the layers, 2x the patch embedding (no gradient w.r.t. the pixels), and 1x the
    ``forward_only_layers`` after the layer the VLM reads (LLaVA ``vision_feature_layer`` -2:
    transformers runs the last CLIP layer, but no gradient reaches it; ``modeling_llava.py``)."""
    fwd = tower_forward_flops_per_image(stack, height, width)
    if not trainable:
        return fwd
    n = encoder_patches(stack, height, width)
    emb = patch_embedding_flops(stack, n)
    tok = n + (1 if stack.class_token else 0)
    unused = stack.forward_only_layers * tok * layer_forward_flops_per_token(stack, tok, causal=False)
    return 3.0 * fwd - emb - 2.0 * unused


# ------------------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class VisionPart:
    """One tower or projector as the job trains it, with the images it sees.

    ``n_in``: patches per image at its input (for a tower, the patches it makes), one entry per
    resolution of the job; ``weights``: the resolutions' shares; ``height``/``width``: the
    resolutions (towers only).
    """

    part: Stack | Projector
    is_tower: bool
    trainable: bool
    below_trainable: bool
    n_in: Any
    weights: np.ndarray
    height: Any = None
    width: Any = None

    def train_flops_per_image(self) -> float:
        """Training FLOPs per image, averaged over the job's resolutions."""
        if self.is_tower:
            return weighted_mean(tower_train_flops_per_image(self.part, self.trainable, self.height, self.width),
                                 self.weights)
        return weighted_mean(projector_train_flops(self.part, self.n_in, self.trainable, self.below_trainable),
                             self.weights)


def vision_parts(model: Model, job) -> Iterator[VisionPart]:
    """The towers, then the projectors (on the last tower's patches), bottom up: what each trains
    (under LoRA, which adapts the decoder, only the parts ``job.trained_in_full`` names) and
    whether anything below it does."""
    parts = trainable_parts(model, job)
    lora = getattr(job, "trainable", "full") == "lora"
    below, last = False, None
    for v in model.vision:
        h, w, p = tower_inputs(job, v)
        train = parts[v.name] and (not lora or full_under_lora(job, v.name))
        n = encoder_patches(v, h, w)
        yield VisionPart(v, True, train, below, n, p, h, w)
        below = below or train
        last = (n, p)
    if last is None:
        return
    n, p = last
    for i, pr in enumerate(model.projectors):
        name = projector_name(i, len(model.projectors))
        train = parts[name] and (not lora or full_under_lora(job, name))
        yield VisionPart(pr, False, train, below, n, p)
        below = below or train
        n = projector_tokens_out(pr, n)


def tower_equivalent_decoder_layers(model: Model, job) -> float:
    """How many decoder layers the vision side weighs on the first pipeline stage (training FLOPs).

    With pipeline parallelism the tower and projector run on stage 1, which becomes the slowest
    stage. Give stage 1 about this many fewer decoder layers (Megatron-LM
    ``--decoder-first-pipeline-num-layers``) to balance it.
    """
    ips = images_per_sequence(model, job)
    if not model.vision or ips <= 0:
        return 0.0
    dec = model.decoder
    per_sequence = sum(part.train_flops_per_image() for part in vision_parts(model, job)) * ips
    # the mean decoder layer: the stack without its LM head, per layer
    layer = (stack_forward_flops_per_token(dec, job.attention_span, causal=True)
             - (lm_head_flops_per_token(dec) if dec.vocab else 0.0)) / dec.layers
    wgrad = 0.0 if dec.name in job.frozen else 1.0
    return float(per_sequence / (layer * job.seq_len * (2.0 + wgrad)))
