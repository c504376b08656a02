"""Options shared by the commands, each defined once (after pip's ``cli/cmdoptions.py``).

A command takes one as its parameter's default, e.g. ``model: Optional[str] = MODEL``; typer
reads the option from it. Choices come from :mod:`trainplan.conventions`, so ``--help`` and the
parser list the same values the specs accept.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from trainplan.cli.values import (  # noqa: F401 (the commands call them as o.split_list, ...)
    as_path, gpu_of, image_size, lora_targets, split_list, trainable)

from trainplan.conventions import (ATTENTION_KERNELS, BASE_WEIGHTS, CP_COLLECTIVES, FP8_RECIPES,
                                   OPTIMIZERS, PRECISION_ALIASES, PRECISIONS, canonical_precision)

def _path(field: str) -> Any:
    """The parser of a path option or argument: refuses an empty path (which typer would turn
    into ``Path("")``, that is ".", the current folder) with an InputError naming ``field``."""
    def parse(value: Any) -> Path:
        if isinstance(value, (str, bytes)) and not value:
            from trainplan.errors import InputError, ParsedInputError
            raise ParsedInputError(InputError(field, "", "a path (an empty one names no file or "
                                              "folder)"))
        return Path(os.fsdecode(value))
    return parse


def path_option(default: Any, *names: str, **kw: Any) -> Any:
    """``typer.Option`` for a path: an empty value is refused (:func:`_path`)."""
    return typer.Option(default, *names, parser=_path(names[0]), metavar="<path>", **kw)


def path_argument(default: Any, field: str, **kw: Any) -> Any:
    """``typer.Argument`` for a path, ``field`` naming it in messages (e.g. "job file")."""
    return typer.Argument(default, parser=_path(field), **kw)


JOB_FILE: Any = path_argument(None, "job file", help="TOML/YAML job file; none: built-in example")
MODEL: Any = typer.Option(None, "--model", "-m", help="preset id or config.json path")
GPU: Any = typer.Option(None, "--gpu", help="accelerator id or alias (see `trainplan gpus`)")
GPU_FILE: Any = path_option(None, "--gpu-file", help="a GPU the catalog lacks: a JSON, TOML or "
                            "YAML file of one accelerator record (the catalog's fields, or "
                            "base = \"h100\" and the fields that differ; docs/catalog.md)")
GPUS: Any = typer.Option(None, "--gpus", help="total GPUs")
GPUS_PER_NODE: Any = typer.Option(None, "--gpus-per-node", help="GPUs per node")
INTER_NODE_GBPS: Any = typer.Option(None, "--inter-node-gbps", help="scale-out NIC Gb/s per GPU "
                                    "(default: the GPU's catalog platform, `trainplan gpus`)")
INTRA_NODE_GBPS: Any = typer.Option(None, "--intra-node-gbps", help="GPU-to-GPU link, "
                                    "unidirectional GB/s per GPU (default: the catalog's)")
SEQ_LEN: Any = typer.Option(None, "--seq-len", help="tokens per sequence")
GLOBAL_BATCH: Any = typer.Option(None, "--global-batch", help="sequences per step")
MICRO_BATCH: Any = typer.Option(None, "--micro-batch", help="sequences per GPU per micro-step")
TOKENS: Any = typer.Option(None, "--tokens", help="total training tokens")
PRICE: Any = typer.Option(None, "--price", help="USD per GPU-hour override")


def _choice(values: tuple[str, ...], canonical: Any = None, aliases: tuple[str, ...] = ()) -> Any:
    """A callback that accepts None or one of ``values`` (a usage error, exit 2, otherwise),
    after ``canonical`` maps another name of a value to it; the error lists ``aliases`` too."""
    def check(value: Optional[str]) -> Optional[str]:
        if value is not None and canonical is not None:
            value = canonical(value)
        if value is not None and value not in values:
            also = f" (or {', '.join(aliases)})" if aliases else ""
            raise typer.BadParameter(f"{value!r} is not one of: {', '.join(values)}{also}")
        return value
    return check


def _completion(values: tuple[str, ...]) -> Any:
    return lambda incomplete: [v for v in values if v.startswith(incomplete)]


_PRECISION_SHORT = ("bf16", "fp16", "fp8", "bf16-true")     # the aliases --help names
PRECISION: Any = typer.Option(None, "--precision",
                              callback=_choice(PRECISIONS, canonical_precision, _PRECISION_SHORT),
                              autocompletion=_completion(PRECISIONS),
                              help="numeric format: " + "|".join(PRECISIONS) + " (also "
                                   + ", ".join(f"{a}={PRECISION_ALIASES[a.replace('-', '_')]}"
                                               for a in _PRECISION_SHORT) + ")")
OPTIMIZER: Any = typer.Option(None, "--optimizer", callback=_choice(OPTIMIZERS),
                              autocompletion=_completion(OPTIMIZERS),
                              help="optimizer: " + "|".join(OPTIMIZERS))
FRAMEWORK: Any = typer.Option(
    None, "--framework", "--implementation",
    help="training framework profile: megatron|torchtitan|fsdp|llm-foundry|deepspeed|pytorch|"
         "analytic (aliases: nemo, fsdp2, accelerate, ddp, hf_trainer...; `trainplan frameworks`)")
PROFILE: Any = path_option(
    None, "--profile", help="calibrated framework profile (trainplan calibrate --out) or "
                            "accelerator efficiency profile (trainplan measure bench)")
ATTENTION_KERNEL: Any = typer.Option(
    None, "--attention-kernel", callback=_choice(ATTENTION_KERNELS),
    autocompletion=_completion(ATTENTION_KERNELS),
    help="fused attention kernel: fa1 (FlashAttention-1, A100) | fa2 | fa3 (FlashAttention-3, "
         "Hopper) | cudnn (cuDNN fused attention); default: the framework's (Megatron and torchtitan: cudnn, others: fa2)")
CP_COMM_TYPE: Any = typer.Option(
    None, "--cp-comm-type", callback=_choice(CP_COLLECTIVES),
    autocompletion=_completion(CP_COLLECTIVES),
    help="context-parallel exchange of K and V: ring | all_gather | all_to_all (Megatron "
         "--cp-comm-type p2p | allgather | a2a); default: the framework's")
FP8_RECIPE: Any = typer.Option(
    None, "--fp8-recipe", callback=_choice(FP8_RECIPES),
    autocompletion=_completion(FP8_RECIPES),
    help="FP8 scaling recipe with --precision fp8_mixed: delayed|current|mxfp8 (Blackwell); "
         "none: the framework's default")
FUSED_OPS: Any = typer.Option(
    None, "--fused-ops", help="op groups your model code fuses (comma list): norm, rope, swiglu, "
                              "bias_dropout_add, cross_entropy, softmax, linear_cross_entropy "
                              "(Liger's fused linear cross-entropy)")
LORA: Any = typer.Option(None, "--lora/--full",
                         help="train LoRA adapters on the frozen base (job.trainable = lora) or "
                              "every weight (full); default: the job file's, else full")
LORA_RANK: Any = typer.Option(None, "--lora-rank", min=1, max=65536,
                              help="LoRA rank r (implies --lora unless --full is given; default 16)")
BASE_WEIGHTS_FLAG: Any = typer.Option(
    None, "--base-weights", callback=_choice(BASE_WEIGHTS), autocompletion=_completion(BASE_WEIGHTS),
    help="the frozen decoder's Linear weights quantized by bitsandbytes: nf4 with --lora is "
         "QLoRA, fp4, or int8 (LLM.int8(), 8 bits) (job.base_weights); default: the compute dtype")
LORA_TARGETS: Any = typer.Option(None, "--lora-targets", help="with --lora: attention (q,k,v,o), "
                                 "all-linear or a comma list (q,v; q_proj,v_proj; linear_qkv); default: the framework's")
HEADROOM: Any = typer.Option(None, "--headroom-gib", min=0.0, help="GiB per GPU kept free beyond the "
                             "peak; default: 7%% of the GPU's memory + 1 GiB (benchmarks/headroom.py)")
DOUBLE_QUANT: Any = typer.Option(
    None, "--double-quant/--no-double-quant",
    help="with --base-weights: quantize the quantization constants too (bitsandbytes "
         "bnb_4bit_use_double_quant; default on)")
FROZEN: Any = typer.Option(None, "--frozen", help="stacks or projectors kept frozen, e.g. "
                                                  "vision (comma list; see `trainplan models`)")
SAMPLES: Any = typer.Option(None, "--samples", help="training samples per epoch (with "
                            "--text-tokens and images: the run's tokens; job.samples)")
EPOCHS: Any = typer.Option(None, "--epochs", help="passes over the samples (default 1)")
IMAGES_PER_SAMPLE: Any = typer.Option(None, "--images-per-sample",
                                      help="images per sample (a VLM's default: 1)")
IMAGE_SIZE: Any = typer.Option(
    None, "--image-size", help="the images' size in pixels: a side (448) or HxW (896x1344); "
    "fixed-resolution towers resize to their own side, tiling towers cut crops")
TEXT_TOKENS: Any = typer.Option(None, "--text-tokens", help="text tokens per sample (with it a "
                                "packed sequence holds several samples and their images)")
ADAMW_IMPL: Any = typer.Option(None, "--adamw", help="foreach|fused AdamW (the step's memory "
                               "temporaries and its HBM passes; default: the framework's)")
DOCUMENT_TOKENS: Any = typer.Option(
    None, "--document-tokens", help="packed documents attend only to themselves (flash-attn varlen, "
    "TE THD, flex attention): their E(d^2)/E(d) in tokens, from `trainplan data lengths`")
TRAIN_IN_FULL: Any = typer.Option(
    None, "--train-in-full", help="with --lora: vision towers or projectors trained in full "
    "beside the adapters (comma list; LLaVA's LoRA recipe: projector)")
JOB: Any = path_option(None, "--job", help="TOML/YAML job file (as for trainplan estimate)")
SET: Any = typer.Option(None, "--set", help="strategy/job field, e.g. zero=3 micro_batch=2 "
                                            "precision=fp16_mixed (repeatable)")
JSON: Any = typer.Option(False, "--json", help="print machine-readable JSON")
FORCE: Any = typer.Option(False, "--force", help="overwrite existing files")
REPORT: Any = path_option(None, "--report", help="write a report: FILE.html or FILE.md")
EMIT: Any = typer.Option(None, "--emit", help="launch files: deepspeed, megatron, torchtitan, "
                                              "accelerate, torchrun, slurm, k8s (repeat or "
                                              "comma list); a layout the framework does not "
                                              "run is refused (exit 2)")
OUT: Any = path_option(None, "--out", help="folder for --emit files (default ./launch); an "
                       "existing one is replaced whole, with --force")
