"""The framework versions the launch files are written for and checked against.

Each emitted set is run through that framework's own parser or config loader at these versions
in the tests (tests/unit/export/test_framework_parsers.py; the packages come with the test
extra, .ci/run). The first version of each entry is the default; ``--framework-version
NAME=VERSION`` picks another listed one. Container images: the GPU vendor's PyTorch image
(:data:`trainplan.export.spec.VENDOR_CONTAINER`) with the framework installed at the pinned
version by the set's ``Dockerfile``; ``--image`` names a ready-made one instead.
"""

from __future__ import annotations

from trainplan.errors import InputError

#: framework -> versions written for, default first. torchtitan: PyPI's current release and
#: the one before (0.3.0 takes ``--module/--config`` and CLI overrides, 0.2.2 a TOML job
#: file); Megatron-LM: the tag of megatron-core 0.16.1 (pretrain_gpt.py and
#: megatron/training are in the repo, not the wheel); the others their PyPI releases.
PINNED: dict[str, tuple[str, ...]] = {
    "torchtitan": ("0.3.0", "0.2.2"),
    "megatron": ("core_v0.16.1",),
    "deepspeed": ("0.19.8",),
    "accelerate": ("1.16.0",),
    "trl": ("1.16.0",),
    "peft": ("0.22.0",),
    "torchtune": ("0.6.1",),
}

#: How the set's Dockerfile installs each framework at a version (pip, or Megatron-LM's
#: repository at its tag, whose pretrain_gpt.py the launch runs from /workspace/Megatron-LM).
INSTALL = {
    "torchtitan": "pip install --no-cache-dir torchtitan=={v} torchdata datasets tyro tensorboard",
    "megatron": ("git clone --depth 1 --branch {v} https://github.com/NVIDIA/Megatron-LM.git "
                 "/workspace/Megatron-LM && pip install --no-cache-dir -e /workspace/Megatron-LM"),
    "deepspeed": "pip install --no-cache-dir deepspeed=={v}",
    "accelerate": "pip install --no-cache-dir accelerate=={v}",
    "trl": "pip install --no-cache-dir trl=={v}",
    "peft": "pip install --no-cache-dir peft=={v}",
    "torchtune": "pip install --no-cache-dir torchtune=={v} torchao",
}


def parse_versions(items: list[str] | tuple[str, ...] | None) -> tuple[tuple[str, str], ...]:
    """``NAME=VERSION`` items (the CLI's ``--framework-version``) as sorted pairs; each must be
    a version in :data:`PINNED`. Raises InputError naming the item and the valid versions."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, ver = str(item).partition("=")
        name, ver = name.strip().lower(), ver.strip()
        if not sep or name not in PINNED:
            raise InputError("--framework-version", item, "NAME=VERSION with NAME one of "
                             + ", ".join(PINNED))
        if ver not in PINNED[name]:
            raise InputError("--framework-version", item, f"{name}= one of "
                             + ", ".join(PINNED[name]) + " (the versions trainplan writes for)")
        out[name] = ver
    return tuple(sorted(out.items()))


def version_of(versions: tuple[tuple[str, str], ...], name: str) -> str:
    """The chosen version of a framework, else its default (the first pinned)."""
    return dict(versions).get(name, PINNED[name][0])


def image_tag(packages: dict[str, str]) -> str:
    """The tag of the image the set's Dockerfile builds: ``trainplan-launch:<name>-<version>...``
    (push it to your registry and pass ``--image``; PLACEHOLDERS.md says so)."""
    body = "-".join(f"{n}{v}".replace("core_v", "") for n, v in sorted(packages.items()))
    return f"trainplan-launch:{body}"[:128]


def dockerfile(base: str, packages: dict[str, str]) -> str:
    """A Dockerfile on the GPU vendor's PyTorch image that installs each framework at the
    version the files are written for (:data:`INSTALL`)."""
    lines = ["# written by trainplan --emit: the image the Kubernetes manifests run",
             f"# build: docker build -t {image_tag(packages)} .", f"FROM {base}"]
    lines += [f"RUN {INSTALL[n].format(v=v)}" for n, v in sorted(packages.items())]
    lines.append("WORKDIR /workspace/launch")
    return "\n".join(lines) + "\n"
