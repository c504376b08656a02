"""The nccl-tests tables in trainplan/validation/collectives.json are well formed and agree with
themselves: nccl-tests prints algbw = size / time and busbw = algbw x 2(n-1)/n for all-reduce
(doc/PERFORMANCE.md), so a mistyped time, size or bandwidth shows as a mismatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainplan.catalog.accelerators import get_accelerator

PATH = Path(__file__).resolve().parents[3] / "src/trainplan/validation/collectives.json"
FACTORS = {"all_reduce": lambda n: 2.0 * (n - 1) / n,
           "all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n}


def _tables():
    return json.loads(PATH.read_text())["tables"]


def test_file_is_small_and_names_its_columns():
    doc = json.loads(PATH.read_text())
    assert PATH.stat().st_size < 30_000
    assert doc["columns"][:4] == ["size_bytes", "oop_time_us", "oop_algbw_GBps", "oop_busbw_GBps"]


@pytest.mark.parametrize("table", _tables(), ids=lambda t: t["id"])
def test_table_is_well_formed(table):
    for key in ("source", "hardware", "command", "accelerator", "collective", "gpus",
                "gpus_per_node", "rows"):
        assert table[key], key
    get_accelerator(table["accelerator"])          # raises for an unknown id
    assert table["collective"] in FACTORS
    assert table["gpus"] % table["gpus_per_node"] == 0 or table["gpus"] < table["gpus_per_node"]
    sizes = [r[0] for r in table["rows"]]
    assert sizes == sorted(set(sizes)) and sizes[0] <= 1024 and sizes[-1] >= 128 * 2 ** 20


@pytest.mark.parametrize("table", _tables(), ids=lambda t: t["id"])
def test_rows_agree_with_their_own_bandwidths(table):
    factor = FACTORS[table["collective"]](table["gpus"])
    for size, t_us, algbw, busbw, t_in_us in table["rows"]:
        assert t_us > 0 and t_in_us > 0
        alg = size / (t_us * 1e3)                  # GB/s
        # printed to 2 decimals, time to 4-5 significant figures
        assert alg == pytest.approx(algbw, abs=0.006, rel=2e-3), size
        assert alg * factor == pytest.approx(busbw, abs=0.006, rel=2e-3), size
