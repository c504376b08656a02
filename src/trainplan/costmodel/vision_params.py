"""Parameter counts of vision-tower parts and projectors beyond the plain ViT block.

Each function follows the module structure of the transformers implementation it names; the
exactness harness (:mod:`trainplan.measure.reference_vision`) builds those modules on the meta
device and compares the totals.
"""

from __future__ import annotations

from trainplan.spec.model import Projector, Stack


def patch_grid(stack: Stack) -> int:
    """Patches of the tower's nominal image: (image_size // patch_size)^2."""
    return (stack.image_size // stack.patch_size) ** 2


def vision_embedding_params(stack: Stack) -> int:
    """Patch embedding, class token, learned positions and pre-LayerNorm of a vision stack.

    Patch embedding: a Conv2d/Conv3d (or, SigLIP2, a Linear) of C*t*p*p -> h, with a bias of h
    where ``patch_bias`` (SigLIP ``SiglipVisionEmbeddings``, InternViT ``InternVLVisionPatchEmbeddings``;
    CLIP and Qwen2-VL/2.5-VL have none). Class token h (CLIP, InternViT). Learned positions:
    ``position_entries`` rows, default one per patch of the nominal grid (+1 with a class token)
    (transformers ``modeling_clip.py``, ``modeling_siglip.py``, ``modeling_internvl.py``,
    ``modeling_idefics3.py``; SigLIP2 keeps a fixed table, ``num_patches``, resized to the image).
    CLIP's pre-LayerNorm 2h.
    """
    h = stack.hidden
    n = stack.channels * stack.patch_size ** 2 * stack.temporal_patch * h
    n += h if stack.patch_bias else 0
    rows = patch_grid(stack)
    if stack.class_token:
        n += h
        rows += 1
    if stack.position == "learned":
        n += (stack.position_entries or rows) * h
    if stack.pre_norm:
        n += 2 * h if stack.norm == "layernorm" else h
    return n


def layer_scale_params(stack: Stack) -> int:
    """InternViT layer scale: lambda_1 and lambda_2, one h-vector each per layer
    (transformers ``modeling_internvl.py`` ``InternVLVisionLayer``)."""
    return 2 * stack.hidden if stack.layer_scale else 0


def pool_head_params(stack: Stack) -> int:
    """SigLIP attention-pooling head (``SiglipMultiheadAttentionPoolingHead``, used when
    ``vision_use_head``): probe h, ``nn.MultiheadAttention`` (in-proj 3h*h + 3h, out-proj
    h*h + h), LayerNorm 2h, MLP (h*f + f + f*h + h)."""
    if not stack.pool_head:
        return 0
    h, f = stack.hidden, stack.ffn_hidden
    return h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f + f * h + h)


def _norm(p: Projector, width: int) -> int:
    return {"layernorm": 2 * width, "rmsnorm": width, "none": 0}[p.norm]


def projector_params_vision(p: Projector) -> int:
    """Parameters of the merge / pixel-shuffle / pooling projectors (m = in * merge^2).

    merge_mlp (Qwen2-VL ``PatchMerger`` LayerNorm(in); Qwen2.5-VL ``Qwen2_5_VLPatchMerger``
    RMSNorm(in)): norm + m*m + m + m*out + out. shuffle_mlp (InternVL
    ``InternVLMultiModalProjector``): LayerNorm(m) + m*out + out + out*out + out. shuffle_linear
    (Idefics3/SmolVLM ``Idefics3Connector``: ``modality_projection`` without bias): m*out.
    pool_linear (Gemma 3 ``Gemma3MultiModalProjector``): RMSNorm(in) + in*out (no bias); the
    average pool has no weights. ``newline``: + out (LLaVA-OneVision ``image_newline``).
    """
    b = 1 if p.bias else 0
    m = p.in_dim * p.merge ** 2
    if p.kind == "merge_mlp":
        n = _norm(p, p.in_dim) + m * m + b * m + m * p.out_dim + b * p.out_dim
    elif p.kind == "shuffle_mlp":
        hid = p.hidden or p.out_dim
        n = _norm(p, m) + m * hid + b * hid + hid * p.out_dim + b * p.out_dim
    elif p.kind == "shuffle_linear":
        n = m * p.out_dim + b * p.out_dim
    elif p.kind == "pool_linear":
        n = _norm(p, p.in_dim) + p.in_dim * p.out_dim + b * p.out_dim
    else:
        raise ValueError(p.kind)
    return n


def newline_params(p: Projector) -> int:
    """LLaVA-NeXT/OneVision's learned ``image_newline`` vector (text hidden size)."""
    return p.out_dim if p.newline else 0
