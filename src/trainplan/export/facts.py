"""What the launch files can fill in from what trainplan knows, and what they cannot.

:func:`model_facts` reads the model's own Hugging Face config (the preset's ``config``, or the
``config.json`` it was loaded from; :func:`trainplan.catalog.models.hf_config_of`): RoPE base
(``rope_theta``) and scaling (``rope_scaling``), norm epsilon (``rms_norm_eps`` /
``layer_norm_eps``), vocabulary, and the tokenizer (the Hugging Face repo the preset's source
names). :func:`lr_schedule` takes the peak learning rate from ``trainplan scale batch``'s advice
(DeepSeek LLM 2024's fit, :func:`trainplan.scaling.batch_size.deepseek_learning_rate`) for the
run's compute. Whatever is still unknown is a :class:`Placeholder`: written as a marked value
(``REPLACE_ME_...`` or an environment variable the script requires) and listed in the set's
``PLACEHOLDERS.md`` (:func:`placeholders_markdown`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.export.spec import LaunchSpec

#: DeepSeek LLM 2024 (arXiv:2401.02954) sec. 2.3: 2000 warm-up steps, then the rate steps down to
#: 31.6% of the peak after 80% of the tokens and to 10% after 90%; trainplan writes a cosine
#: decay to the same final 10% (Megatron, torchtitan and the HF trainer all offer cosine).
WARMUP_STEPS = 2000
MIN_LR_FRACTION = 0.1


@dataclass(frozen=True)
class Placeholder:
    """A value the files need and trainplan cannot know: ``token`` as written in the files."""

    token: str
    what: str
    files: str


@dataclass(frozen=True)
class ModelFacts:
    rope_theta: float | None
    rope_scaling: dict[str, Any] | None
    norm_eps: float | None
    vocab: int
    tokenizer: str | None          # Hugging Face repo id


@dataclass(frozen=True)
class LRSchedule:
    peak: float | None             # None: not known (a placeholder)
    min_lr: float | None
    warmup_steps: int
    steps: int
    source: str


def model_facts(spec: LaunchSpec) -> ModelFacts:
    """RoPE, norm epsilon, vocabulary and tokenizer of the model, from its config.json."""
    from trainplan.catalog.models import hf_config_of, hf_repo_of

    cfg: dict[str, Any] = hf_config_of(spec.model) or {}
    sub = cfg.get("text_config")
    text: dict[str, Any] = sub if isinstance(sub, dict) else cfg
    rope = text.get("rope_parameters") if isinstance(text.get("rope_parameters"), dict) else None
    theta = text.get("rope_theta", (rope or {}).get("rope_theta"))
    scaling = text.get("rope_scaling") or (rope if rope and rope.get("rope_type") not in
                                           (None, "default") else None)
    eps = next((text[k] for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon",
                                  "norm_epsilon") if isinstance(text.get(k), (int, float))), None)
    dec = spec.model.decoder
    return ModelFacts(rope_theta=float(theta) if isinstance(theta, (int, float)) else None,
                      rope_scaling=dict(scaling) if isinstance(scaling, dict) else None,
                      norm_eps=float(eps) if eps is not None else None,
                      vocab=dec.vocab, tokenizer=hf_repo_of(spec.model))


def deepseek_flops(spec: LaunchSpec, tokens: float) -> float:
    """C = M D in DeepSeek LLM's convention (arXiv:2401.02954 eq. 2): M = 72 n_layer d^2 +
    6 n_layer d l_seq non-embedding FLOPs per token, whose first term is 6 x the non-embedding
    parameters of their dense architecture; here 6 x the decoder's active non-embedding
    parameters (``costmodel.params``; MoE: top-k and shared experts) plus the attention term."""
    from trainplan.costmodel.params import stack_params

    dec = spec.model.decoder
    p = stack_params(dec)
    active_non_emb = p.active - p.embedding
    m = 6.0 * active_non_emb + 6.0 * dec.layers * dec.hidden * spec.job.seq_len
    return m * tokens


def lr_schedule(spec: LaunchSpec) -> LRSchedule:
    """Peak learning rate from ``scale batch``'s advice for the run's compute
    (``LaunchSpec.peak_lr``, set by the services from DeepSeek LLM's eta_opt = 0.3118 C^-0.125
    with C of :func:`deepseek_flops`), warm-up :data:`WARMUP_STEPS` (at most a tenth of the run),
    a cosine decay to :data:`MIN_LR_FRACTION` of the peak. Without advice (a fine-tune, no token
    count, a spec built without the services) the peak is a placeholder."""
    steps = spec.train_steps
    warmup = max(1, min(WARMUP_STEPS, steps // 10))
    if spec.peak_lr is None:
        why = ("a fine-tune or a job without a token count: DeepSeek's fit sizes pre-training "
               "from its compute")
        return LRSchedule(None, None, warmup, steps, f"placeholder ({why})")
    peak = float(f"{spec.peak_lr:.3g}")
    return LRSchedule(peak, float(f"{peak * MIN_LR_FRACTION:.3g}"), warmup, steps,
                      "DeepSeek LLM 2024 eta_opt = 0.3118 C^-0.125 (trainplan scale batch)")


def advice_applies(spec: LaunchSpec) -> float | None:
    """The run's tokens where DeepSeek's learning-rate fit applies (pre-training from scratch
    with a token count), else None."""
    from trainplan.costmodel.estimate import run_tokens

    tokens = run_tokens(spec.model, spec.job)
    if not tokens or spec.job.trainable == "lora" or spec.job.frozen:
        return None
    return float(tokens)


def common_placeholders(spec: LaunchSpec) -> list[Placeholder]:
    """The values every set needs that no plan can know: data, tokenizer where the model names
    none, checkpoints, the learning rate where :func:`lr_schedule` has none, the nodes."""
    facts = model_facts(spec)
    out = [Placeholder("DATA_PATH", "the training data (path or dataset name, tokenized as the "
                       "framework expects)", "all launch scripts (environment variable)")]
    if facts.tokenizer is None:
        out.append(Placeholder("TOKENIZER_MODEL", f"the tokenizer of {spec.model.name} (a Hugging "
                               "Face repo id or local folder): the model's preset names none",
                               "all launch scripts (environment variable)"))
    out.append(Placeholder("CHECKPOINT_DIR", "where checkpoints go (default ./checkpoints)",
                           "all launch scripts (environment variable)"))
    if lr_schedule(spec).peak is None:
        out.append(Placeholder("LR", "the peak learning rate, "
                               + lr_schedule(spec).source + "; configs carry the framework's "
                               "default, marked PLACEHOLDER", "Megatron: environment variables "
                               "LR and MIN_LR; configs: the value marked PLACEHOLDER"))
    if spec.image and spec.image.startswith("trainplan-launch:"):
        out.append(Placeholder(spec.image, "the image the Kubernetes manifests run: build it "
                               "from the set's Dockerfile, push it to your registry and use that "
                               "name (or emit with --image)", "trainjob.yaml, pytorchjob.yaml"))
    if spec.nodes > 1:
        out.append(Placeholder("MASTER_ADDR / NODE_RANK", "the first node's address and this "
                               "node's rank", "torchrun launch scripts"))
    return out


def placeholders_markdown(spec: LaunchSpec, items: list[Placeholder], versions: dict[str, str],
                          facts_lines: list[str]) -> str:
    """PLACEHOLDERS.md: what was filled in (and from where), what must still be set."""
    from trainplan.io.formats import one_line
    lines = [f"# Launch files for {one_line(spec.model.name)}: {spec.strategy.layout()} on "
             f"{spec.gpus} GPUs",
             "", "Written by trainplan. Framework versions these files were checked against:", ""]
    lines += [f"- {name} {ver}" for name, ver in sorted(versions.items())]
    lines += ["", "## Filled in from what trainplan knows", ""]
    lines += [one_line(f"- {line}") for line in facts_lines]
    lines += ["", "## PLACEHOLDERS: set these before launching", ""]
    notes = spec.training_notes()
    if notes:
        from trainplan.io.formats import comment
        lines += ["", "## What the training script must do (no launcher flag says it)", ""]
        lines += [comment(n, prefix="- ") for n in notes]
    seen: set[str] = set()
    for p in items:
        if p.token in seen:
            continue
        seen.add(p.token)
        lines.append(one_line(f"- `{p.token}`: {p.what} ({p.files})"))
    return "\n".join(lines) + "\n"


def filled_lines(spec: LaunchSpec) -> list[str]:
    """One line per filled-in value and its source, for PLACEHOLDERS.md."""
    f, lr = model_facts(spec), lr_schedule(spec)
    out = [f"sequence length {spec.job.seq_len}, global batch {spec.job.batch_sequences} sequences,"
           f" {spec.train_steps} steps (the plan's job)",
           f"vocabulary {f.vocab} (the model)"]
    if f.rope_theta is not None:
        out.append(f"RoPE base {f.rope_theta:g} (the model's config.json rope_theta)")
    if f.rope_scaling:
        out.append(f"RoPE scaling {f.rope_scaling} (config.json rope_scaling)")
    if f.norm_eps is not None:
        out.append(f"norm epsilon {f.norm_eps:g} (config.json)")
    if f.tokenizer:
        out.append(f"tokenizer {f.tokenizer} (the Hugging Face repo of the model's config)")
    if lr.peak is not None:
        out.append(f"peak learning rate {lr.peak:g}, cosine to {lr.min_lr:g}, {lr.warmup_steps} "
                   f"warm-up steps ({lr.source}; warm-up and decay: DeepSeek LLM sec. 2.3)")
    return out
