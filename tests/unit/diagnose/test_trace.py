import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.jsonstream import stream_trace
from trainplan.diagnose.ranks import load_ranks, stragglers
from trainplan.diagnose.trace import CLASSES, hta_temporal, read_rank, step_breakdown, summarize
from trainplan.errors import InputError

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "diagnose"
DL = "kineto_resnet50_dataloader"


def _traces(shared):
    return sorted((shared / "traces").glob("*/*.json.gz"))


def test_stream_reader_matches_json_load(shared):
    f = shared / "traces" / "hta_resnet50_ddp" / "rank0.json.gz"
    meta = {}
    events = list(stream_trace(f, meta.__setitem__))
    whole = json.load(gzip.open(f))
    assert events == whole["traceEvents"]
    assert meta["distributedInfo"] == whole["distributedInfo"]


def test_every_shared_trace_adds_up_to_its_steps(shared):
    files = _traces(shared)
    assert len(files) == 6
    for f in files:
        rows = step_breakdown(read_rank(f))
        assert rows
        for r in rows:
            assert r["step_us"] > 0
            assert abs(r["sum_us"] - r["step_us"]) <= 0.01 * r["step_us"], f
            assert all(r[f"{k}_us"] >= -1e-6 for k in CLASSES + ("idle",))


def test_dataloader_pair(shared):
    d = shared / "traces" / DL
    zero = summarize(step_breakdown(read_rank(next(d.glob("num_workers_0*")))))
    four = summarize(step_breakdown(read_rank(next(d.glob("num_workers_4*")))))
    assert "input-bound" in zero["verdicts"]
    assert "input-bound" not in four["verdicts"]
    assert zero["mean"]["idle_data_wait_us"] > 10 * four["mean"]["idle_data_wait_us"]


def test_dlrm_straggler_from_fixture():
    ranks = load_ranks([FIX / "dlrm_kineto.tar.gz"])
    assert [r for r, _ in ranks] == list(range(8))
    s = stragglers(ranks)
    late = {p["rank"]: p["lateness_us"] for p in s["per_rank"]}
    assert s["straggler"] == max(late, key=late.get)
    # the straggler enters the step last, so its ProfilerStep is the shortest
    steps = {r: rt.steps[0][1] for r, rt in ranks}
    assert s["straggler"] == max(steps, key=steps.get)
    res = CliRunner().invoke(app, ["diagnose", "trace", str(FIX / "dlrm_kineto.tar.gz")])
    assert res.exit_code == 0 and f"straggler: rank {s['straggler']}" in res.output
    # the count it was last at, of all matched, and the others' wait at just those collectives
    worst = next(p for p in s["per_rank"] if p["rank"] == s["straggler"])
    assert s["straggler_last_arrivals"] == worst["last_arrivals"] < s["collectives_matched"]
    assert f"last to arrive at {worst['last_arrivals']} of {s['collectives_matched']}" in res.output
    all_wait = sum(p["wait_us"] for p in s["per_rank"] if p["rank"] != s["straggler"])
    assert 0 < s["others_wait_us"] < all_wait


def test_truncated_trace_exits_2(shared, tmp_path):
    src = gzip.open(shared / "traces" / DL / next((shared / "traces" / DL).glob("*_4*")).name).read()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(src[: len(src) // 2]))
    with pytest.raises(InputError):
        read_rank(cut)
    cut2 = tmp_path / "cut2.json.gz"
    cut2.write_bytes(gzip.compress(src)[:100000])  # a gzip stream cut short
    res = CliRunner().invoke(app, ["diagnose", "trace", str(cut2)])
    assert res.exit_code == 2 and "complete" in res.output


def test_agrees_with_holistic_trace_analysis_on_every_trace(shared, tmp_path):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis (extra 'hta') is not installed")
    from hta.trace_analysis import TraceAnalysis
    from trainplan.diagnose.ranks import expand_inputs
    import tempfile
    work = tempfile.TemporaryDirectory(dir=tmp_path)
    files = _traces(shared) + expand_inputs([FIX / "dlrm_kineto.tar.gz"], work)[:3]
    for i, f in enumerate(files):
        d = tmp_path / f"t{i}"
        d.mkdir()
        (d / f.name).write_bytes(f.read_bytes())
        ref = TraceAnalysis(trace_dir=str(d)).get_temporal_breakdown(visualize=False).iloc[0]
        ours = hta_temporal(read_rank(f))
        for k in ("idle", "compute", "non_compute"):
            assert abs(ours[f"{k}_pct"] - ref[f"{k}_time_pctg"]) <= 2.0, (f, k)


def _rank_trace(path, rank, world, t0):
    """A minimal Kineto trace of one rank: one step with a GEMM then an NCCL all-reduce."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": t0, "dur": 1000},
          {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "ts": t0 + 10, "dur": 500},
          {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float",
           "ts": t0 + 520 + 100 * rank, "dur": 300}]
    path.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
                                "traceEvents": ev}))
    return path


@pytest.mark.parametrize("world, start, why", [
    ((2, 8), (0, 0), "different world sizes"),            # two jobs (hta_trace_diff's A100 vs V100)
    ((2, 2), (0, 86_400e6), "do not overlap"),            # one job's ranks profiled a day apart
])
def test_traces_of_different_jobs_get_no_straggler(tmp_path, world, start, why):
    for r in (0, 1):
        _rank_trace(tmp_path / f"rank{r}.json", r, world[r], 1.7e15 + start[r])
    s = stragglers(load_ranks([tmp_path]))
    assert s["straggler"] is None and why in s["not_compared"]
    res = CliRunner().invoke(app, ["diagnose", "trace", str(tmp_path)])
    assert res.exit_code == 0 and "no straggler analysis" in res.output
    assert "straggler: rank" not in res.output


def test_ranks_of_one_job_still_get_their_straggler(tmp_path):
    for r in (0, 1):
        _rank_trace(tmp_path / f"rank{r}.json", r, 2, 1.7e15)
    s = stragglers(load_ranks([tmp_path]))
    assert s["straggler"] == 1 and s["straggler_lateness_us"] == pytest.approx(100)


def test_shared_trace_diff_pair_is_not_one_job(shared):
    s = stragglers(load_ranks([shared / "traces" / "hta_trace_diff"]))
    assert s["straggler"] is None


@pytest.mark.parametrize("gz", [False, True])
def test_a_trace_with_a_byte_order_mark_is_read(tmp_path, gz):
    """A trace re-saved by a Windows editor starts with a UTF-8 byte-order mark; it had been
    refused ("found '\\ufeff'")."""
    import gzip
    plain = _rank_trace(tmp_path / "plain.json", 0, 1, 1.7e15)
    body = "\ufeff".encode() + plain.read_bytes()
    bom = tmp_path / ("bom.json.gz" if gz else "bom.json")
    bom.write_bytes(gzip.compress(body) if gz else body)
    meta_a: dict = {}
    meta_b: dict = {}
    assert list(stream_trace(bom, meta_a.__setitem__)) == list(stream_trace(plain, meta_b.__setitem__))
    assert meta_a == meta_b and meta_a
