"""The page's state: parsing, the share link's query string, the CLI flags it stands for."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from trainplan.errors import InputError
from trainplan.ui import plans
from trainplan.ui.state import KNOBS, State, cli_args, from_mapping, job_data, parsed


def roundtrip(state: State) -> State:
    return from_mapping(dict(parse_qsl(state.query(), keep_blank_values=True)))


def test_defaults_make_an_empty_query():
    assert State().query() == ""
    assert roundtrip(State()) == State()


@pytest.mark.parametrize("state", [
    State(model="<script>alert(1)</script>", gpus="16", sp="off", config='{"a": "&b=c"}'),
    State(tokens="", plan_gpus="64..1024", budget_usd="1e6", deadline_days="30"),
])
def test_query_roundtrip(state):
    assert roundtrip(state) == state


def test_cli_args_of_switches_and_blanks():
    args = cli_args(State(sp="off", offload_optimizer="on", uneven_stages="on", tp="2", tokens=""))
    assert "--no-sp" in args and "--offload-optimizer" in args and "--uneven-stages" in args
    assert args[args.index("--tp") + 1] == "2"
    assert "--tokens" not in args and "--pp" not in args


@pytest.mark.parametrize("field,text,flag", [("gpus", "8.5", "--gpus"), ("tokens", "lots", "--tokens"),
                                             ("sp", "yes", "--sp")])
def test_malformed_values_name_the_flag(field, text, flag):
    with pytest.raises(InputError) as e:
        parsed(State(**{field: text}))
    assert e.value.field == flag and e.value.value == text


def test_over_long_field_is_refused():
    with pytest.raises(InputError, match="at most"):
        from_mapping({"model": "x" * 1_000_001})


def test_unknown_keys_are_ignored_and_values_stripped():
    assert from_mapping({"gpus": " 16 ", "nonsense": "1"}) == State(gpus="16")


def test_with_layout_blanks_the_other_knobs():
    st = State(tp="8", pp="2", zero="3").with_layout(tp=2, sp=True, gpus=16)
    assert (st.tp, st.pp, st.zero, st.sp, st.gpus) == ("2", "", "", "on", "16")
    assert set(KNOBS) <= set(vars(st))


def test_job_data_is_the_estimate_commands_sections(tmp_path):
    data = job_data(State(gpus="16", gpus_per_node="4", tp="2", precision="bf16", sp="off"), str(tmp_path))
    assert data["model"] == {"preset": "llama-3-8b"}
    assert data["cluster"] == {"gpu": "h100_sxm", "gpus": 16, "gpus_per_node": 4}
    assert data["strategy"] == {"tp": 2, "sequence_parallel": False}
    assert data["job"]["precision"] == "bf16_mixed" and data["job"]["tokens"] == 1e12


def test_plan_args_carry_the_search_limits():
    args = plans.plan_args(State(tp="2", plan_gpus="8..64", deadline_days="30", budget_usd="1e6"))
    assert "--tp" not in args and "--gpus" in args
    assert args[args.index("--gpus") + 1] == "8..64"
    assert args[args.index("--deadline-days") + 1] == "30"
    assert args[args.index("--budget-usd") + 1] == "1e6"
    assert plans.limits(State(budget_usd="1e6")) == {"deadline_days": None, "budget_usd": 1e6}
    with pytest.raises(InputError, match="--deadline-days"):
        plans.limits(State(deadline_days="soon"))
