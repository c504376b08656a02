"""Specs are immutable everywhere: changed copies go through validation again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from trainplan.catalog import get_model
from trainplan.errors import InputError
from trainplan.spec.base import evolve
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy

SRC = Path(__file__).resolve().parents[2] / "src" / "trainplan"


def test_no_mutation_or_unvalidated_copy_in_the_source():
    pattern = re.compile(r"object\.__setattr__|model_copy\(update|SimpleNamespace")
    hits = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line) and not line.lstrip().startswith(("#", "(``", "``"))
            and p.name != "base.py"]
    assert hits == []


def test_job_derives_the_batch_without_mutation():
    j = Job(seq_len=2048, global_batch_tokens=2048 * 64)
    assert j.global_batch == 64 and j.batch_tokens == 2048 * 64
    assert Job().global_batch == 1024
    with pytest.raises(ValidationError, match="multiple of seq_len"):
        Job(seq_len=3000, global_batch_tokens=4096)
    with pytest.raises(ValidationError, match="not both"):
        Job(seq_len=2048, global_batch=2, global_batch_tokens=2048)
    with pytest.raises(ValidationError):
        j.seq_len = 1                      # frozen


def test_evolve_validates_again():
    st = Strategy(tp=2)
    assert evolve(st, zero=3).zero == 3 and st.zero == 1
    with pytest.raises(InputError, match="Strategy.tp"):     # never pydantic's ValidationError
        evolve(st, tp=0)
    dec = get_model("llama-2-7b").decoder
    with pytest.raises(InputError, match="vocab"):
        evolve(dec, vocab=0)               # a decoder needs a vocabulary: model_copy let it pass


def test_launch_spec_is_the_specs_plus_a_program():
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.export import LaunchSpec
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.specs import Specs

    spec = LaunchSpec(model=get_model("llama-2-7b"), job=Job(global_batch=64),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=16),
                      strategy=Strategy(tp=2))
    assert isinstance(spec, Specs)
    assert spec.strategy.dp == 8           # completed on construction
    assert evolve(spec, script="x.py").strategy == spec.strategy
