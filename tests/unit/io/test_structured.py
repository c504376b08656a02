"""JSON, YAML and TOML within nesting and expansion limits: an InputError naming the field and
the limit, never a RecursionError or an exponential walk."""

from __future__ import annotations

import pytest

from trainplan.errors import InputError
from trainplan.io.structured import (MAX_DEPTH, check_nesting, parse_json, parse_toml, parse_yaml,
                                     read_json)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 100_000])
def test_deep_json_names_the_depth_limit(tmp_path, depth):
    p = tmp_path / "config.json"
    p.write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(InputError, match=f"nested at most {MAX_DEPTH} deep") as e:
        read_json("model", p)
    assert e.value.field == "model"


def test_json_at_the_depth_limit_is_read():
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json("x", "x", text) is not None


def test_bad_json_names_line_and_column():
    with pytest.raises(InputError, match="line 2 column"):
        parse_json("law file", "law.json", '{"a": 1,\n "b": }')


def test_yaml_billion_laughs_is_refused_quickly():
    lines = ["a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(InputError, match="aliases or shared references"):
        parse_yaml("job file", "job.yaml", "\n".join(lines))


@pytest.mark.parametrize("parse", [parse_yaml, parse_toml])
def test_deep_yaml_and_toml(parse):
    text = "a = " + "[" * 3000 + "]" * 3000 if parse is parse_toml else \
        "a: " + "[" * 3000 + "]" * 3000
    with pytest.raises(InputError, match="nested at most"):
        parse("job file", "job", text)


def test_check_nesting_counts_shared_references():
    leaf = [1] * 10
    shared = [leaf] * 10
    obj = [shared] * 10                     # 1 + 10 + 100 + 1,000 values when walked
    assert check_nesting("x", "x", obj, max_nodes=2000) is obj
    with pytest.raises(InputError, match="at most 1,000 values"):
        check_nesting("x", "x", obj, max_nodes=1000)
