"""scaling.allocate: the isoflop curve's arguments."""


def test_isoflop_curve_refuses_a_span_outside_the_law_sizes():
    """benchmarks/fuzz.py found span=inf raising numpy's ValueError (a geometric grid through 0)."""
    import pytest

    from trainplan.errors import InputError
    from trainplan.scaling import isoflop_curve
    for bad in (float("inf"), 1.0, 0.5, float("nan"), 1e300):
        with pytest.raises(InputError) as e:
            isoflop_curve(1e21, span=bad)
        assert e.value.field == "span"
    assert isoflop_curve(1e21, span=10.0) is not None
