"""The ui's routes through FastAPI's TestClient, each checked against the CLI run in-process on
the same inputs: the estimate's JSON, bad-input messages, launch files, report, plan, diagnosis."""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from cli_helpers import invoke  # noqa: E402
from trainplan.ui import plans  # noqa: E402
from trainplan.ui.app import create_app  # noqa: E402
from trainplan.ui.state import State, cli_args, from_mapping  # noqa: E402

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def cli_json(state: State) -> str:
    """``trainplan estimate --json`` of the state (a pasted config.json: run beside the file
    the page writes, pasted-config/config.json, in the current folder)."""
    cfg = None
    if state.config.strip():
        cfg = Path("pasted-config") / "config.json"
        cfg.parent.mkdir()
        cfg.write_text(state.config)
    r = invoke("estimate", *cli_args(state, None if cfg is None else str(cfg)), "--json")
    assert r.exit_code == 0, r.output
    return r.stdout


def cli_error(*args: str) -> str:
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    return r.stderr.strip().removeprefix("error: ")


def shown_numbers(html: str) -> dict[str, str]:
    """Every number the page shows with its JSON key: {key: the value's JSON text}."""
    pairs = re.findall(r'data-key="([^"]+)" data-value=\'([^\']*)\'', html)
    assert pairs, html[:2000]
    return dict(pairs)


def lookup(d, key):
    for part in key.split("."):
        d = d[part]
    return d


STATES = [
    State(),
    State(gpus="16", tp="2", zero="3", micro_batch="2", recompute="full", tokens="2e12"),
    State(model="llama-3-70b", gpus="64", tp="8", pp="4", vp="2", framework="megatron",
          precision="fp8_mixed", seq_len="8192", global_batch="512", price="2.5"),
    State(framework="deepspeed", zero="3", offload_optimizer="on", sp="off"),
]


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.query() or "default")
def test_numbers_are_the_clis(client, state):
    expected = json.loads(cli_json(state))
    r = client.post("/estimate", data=vars(state))
    assert r.status_code == 200
    shown = shown_numbers(r.text)
    for key, text in shown.items():
        assert json.loads(text) == lookup(expected, key), key
    assert {"mfu", "time.step_s", "memory.total_gib", "totals.cost_usd",
            "totals.gpu_hours", "totals.wall_clock_days", "accuracy.cost_usd_low"} <= set(shown)
    for w in expected["warnings"]:
        assert _text(w) in r.text
    for a in expected["assumptions"]:
        assert _text(a) in r.text


def _text(s: str) -> str:
    """``s`` as the templates escape it (Jinja2's autoescape: markupsafe)."""
    from markupsafe import escape
    return str(escape(s))


def test_estimate_json_is_the_cli_output_byte_for_byte(client):
    state = STATES[1]
    r = client.get("/estimate.json?" + state.query())
    assert r.status_code == 200
    assert r.text == cli_json(state)


def test_pasted_config_json(client, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
           "intermediate_size": 8192, "num_attention_heads": 16, "num_key_value_heads": 8,
           "num_hidden_layers": 8, "vocab_size": 32000, "max_position_embeddings": 4096,
           "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    state = State(config=json.dumps(cfg))
    r = client.get("/estimate.json?" + state.query())
    assert r.status_code == 200, r.text
    assert r.text == cli_json(state)
    assert '"source": "Hugging Face config pasted-config/config.json"' in r.text


def test_bad_value_shows_the_clis_message(client):
    r = client.post("/estimate", data={"tp": "3"})
    expected = cli_error("estimate", "--model", "llama-3-8b", "--gpu", "h100_sxm", "--gpus", "8",
                         "--tp", "3", "--json")
    assert expected in r.text
    assert 'id="error"' in r.text


def test_unknown_model_message_and_hostile_name_escaped(client):
    r = client.get("/", params={"model": HOSTILE})
    assert r.status_code == 200
    assert HOSTILE not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text
    expected = cli_error("estimate", "--model", HOSTILE, "--json")
    assert _text(expected) in r.text


def test_malformed_number_names_the_flag(client):
    r = client.post("/estimate", data={"gpus": "eight"})
    assert "--gpus = &#39;eight&#39; is not valid: a whole number" in r.text


def test_share_link_restores_the_state(client):
    state = STATES[2]
    assert from_mapping(dict(parse_qsl(state.query(), keep_blank_values=True))) == state
    blank = State(tokens="")             # a cleared field differs from the default: kept
    assert from_mapping(dict(parse_qsl(blank.query(), keep_blank_values=True))) == blank
    r = client.get("/?" + state.query())
    assert 'value="llama-3-70b"' in r.text
    assert re.search(r'<option value="fp8_mixed" selected>', r.text)
    assert f'id="share" readonly value="http://testserver/?{_text(state.query())}"' in r.text


def test_launch_zip_equals_emit(client, tmp_path):
    state = STATES[1]
    formats = "megatron,deepspeed,torchtitan,torchrun,slurm,k8s"
    r = client.get(f"/download/launch.zip?{state.query()}&formats={formats}")
    assert r.status_code == 200, r.text
    out = tmp_path / "launch"
    res = invoke("estimate", *cli_args(state), "--emit", formats, "--out", str(out))
    assert res.exit_code == 0, res.output
    zf = zipfile.ZipFile(io.BytesIO(r.content))
    names = sorted(zf.namelist())
    assert names == sorted(p.name for p in out.iterdir())
    for name in names:
        assert zf.read(name) == (out / name).read_bytes(), name
        mode = zf.getinfo(name).external_attr >> 16
        assert mode == (out / name).stat().st_mode & 0o777, name


def test_launch_zip_bad_format_is_the_clis_message(client):
    r = client.get("/download/launch.zip?formats=nope")
    assert r.status_code == 400
    assert r.text.strip() == "--emit = 'nope' is not valid: " + \
        "deepspeed | megatron | torchtitan | accelerate | torchrun | slurm | k8s"


def test_report_equals_cli_report(client, tmp_path):
    state = STATES[1]
    r = client.get("/download/report.html?" + state.query())
    assert r.status_code == 200
    path = tmp_path / "r.html"
    res = invoke("estimate", *cli_args(state), "--report", str(path))
    assert res.exit_code == 0, res.output
    assert r.text == path.read_text()


def test_plan_progress_ranking_and_row_load(client):
    state = State(plan_gpus="8..16")
    r = client.post("/plan", data=vars(state))
    sid = re.search(r'data-sid="([0-9a-f]+)"', r.text).group(1)
    for _ in range(600):                    # a hang guard, not a timing
        status = client.get(f"/plan/{sid}/status.json").json()
        if status["finished"]:
            break
        time.sleep(0.1)
    assert status["finished"] and status["error"] is None, status
    assert status["done"] == status["total"] > 0
    page = client.get(f"/plan/{sid}").text
    assert 'id="ranking"' in page and "<svg" in page
    row = re.search(r'id="plan-row-2"[^>]*data-query="([^"]+)"', page).group(1).replace("&amp;", "&")
    loaded = from_mapping(dict(parse_qsl(row, keep_blank_values=True)))
    search = plans.get(sid)
    expected = search.result.top[1]
    got = json.loads(client.get("/estimate.json?" + row).text)
    assert got["layout"] == expected.layout
    assert got["time"]["step_s"] == expected.time.step_s
    assert got["memory"]["total_gib"] == expected.memory.total_gib
    ws = client.get("/workspace?" + row).text
    assert f'id="tp" name="tp" inputmode="numeric" value="{loaded.tp}"' in ws


def test_plan_winner_is_the_clis(client):
    state = State(plan_gpus="8..16", budget_usd="2e5", objective="cheapest")
    sid = plans.start(state, wait=True)
    search = plans.get(sid)
    assert search.error is None, search.error
    res = invoke("plan", *plans.plan_args(state), "--json")
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    assert [e.layout for e in search.result.top] == [e["layout"] for e in cli["top"]]
    assert search.result.winner.totals.cost_usd == cli["top"][0]["totals"]["cost_usd"]
    assert search.result.constraints == cli["constraints"]


def test_plan_error_is_the_clis_message(client):
    r = client.post("/plan", data={"plan_gpus": "8..4"})
    sid = re.search(r'data-sid="([0-9a-f]+)"', r.text).group(1)
    for _ in range(300):
        if plans.get(sid).finished:
            break
        time.sleep(0.1)
    res = invoke("plan", *plans.plan_args(plans.get(sid).state), "--json")
    assert res.exit_code == 2
    msg = res.stderr.strip().removeprefix("error: ")
    assert plans.get(sid).error == msg
    assert _text(msg) in client.get(f"/plan/{sid}").text


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
       "capacity of 79.10 GiB of which 1.50 GiB is free. Of the allocated memory 75.00 GiB is "
       "allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.")


def test_diagnose_oom_is_the_clis(client, tmp_path):
    from trainplan.ui import diagnosis
    state = State(tp="2", zero="1")
    r = client.post("/diagnose", data=vars(state) | {"artifact": OOM, "extra": ""})
    assert r.status_code == 200 and 'id="diagnosis-result"' in r.text
    path = tmp_path / "oom.txt"
    path.write_text(OOM)
    sets = [a for kv in diagnosis.sets(state) for a in ("--set", kv)]
    res = invoke("diagnose", "oom", str(path), "--model", state.model, "--gpu", state.gpu,
                 "--gpus", state.gpus, *sets, "--json")
    assert res.exit_code == 0, res.output
    expected = json.loads(res.stdout)
    got, err = diagnosis.run(state, OOM, "oom.txt")
    assert err is None
    got.pop("kind")
    assert json.loads(json.dumps(got)) == expected
    assert _text(expected["reason"]) in r.text


def test_diagnose_uploaded_log(client):
    log = "".join(f" iteration {i}/ 100 | elapsed time per iteration (ms): {1000 + i} | "
                  f"lm loss: {5 - i / 10:.4E} |\n" for i in range(1, 12))
    r = client.post("/diagnose", data={"model": "llama-3-8b"},
                    files={"log_file": ("train.log", log.encode(), "text/plain")})
    assert r.status_code == 200
    assert "training log" in r.text and "step_s_median" in r.text


def test_diagnose_empty_is_a_message(client):
    r = client.post("/diagnose", data={"artifact": ""})
    assert 'id="diagnose-error"' in r.text


def test_page_loads_nothing_from_another_host(client):
    html = client.get("/").text
    refs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert refs and all(r.startswith(("/", "data:", "#")) for r in refs), refs
    for path in ("/static/htmx.min.js", "/static/app.js", "/static/app.css"):
        assert client.get(path).status_code == 200


def test_vendored_htmx_is_the_noted_release(client):
    import hashlib
    from trainplan.ui.app import HERE
    note = (HERE / "static" / "htmx.VERSION.txt").read_text()
    body = client.get("/static/htmx.min.js").content
    assert hashlib.sha256(body).hexdigest() in note
    assert "htmx.org@2.0.11" in note and b'version:"2.0.11"' in body.replace(b" ", b"")
    assert "Zero-Clause BSD" in (HERE / "static" / "htmx.LICENSE.txt").read_text()
