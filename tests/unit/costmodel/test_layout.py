"""The Layout's helpers: one dispatch on the recompute code, and membership without np.isin."""

import numpy as np
import pytest

from trainplan.costmodel.layout import RECOMPUTE_NAMES, by_recompute, one_of


@pytest.mark.parametrize("allowed", [(), (0,), (0, 1, 3), (1, 2, 3, 4, 5)])
def test_one_of_answers_as_isin(allowed):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 6, size=(5, 40))
    assert np.array_equal(one_of(x, allowed), np.isin(x, allowed))
    for v in range(6):                     # one number: a 0-d answer, as np.isin gives
        assert bool(one_of(v, allowed)) == (v in allowed)
        assert np.shape(one_of(v, allowed)) == ()


def test_by_recompute_takes_each_codes_value():
    codes = np.arange(len(RECOMPUTE_NAMES))
    assert RECOMPUTE_NAMES[3] == "layers" and RECOMPUTE_NAMES[4] == "op_selective"
    got = by_recompute(codes, 10.0, 11.0, 12.0, 13.0, 14.0)
    assert got.tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    # values that are arrays of the codes' shape are taken element by element, scalars broadcast
    vals = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert by_recompute(codes, 0.0, vals, vals * 10, -vals, 7.0).tolist() == [0.0, 2.0, 30.0,
                                                                           -4.0, 7.0]
    assert float(by_recompute(2, 0.0, 1.0, 5.0, 3.0, 4.0)) == 5.0
    assert by_recompute(np.array([[0], [2]]), 0.0, 0.0, vals, 0.0, 0.0).shape == (2, 5)
