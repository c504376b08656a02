"""check_int takes the whole numbers a notebook passes (numpy's, from a pandas column)."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan.errors import InputError
from trainplan.io.limits import check_int


@pytest.mark.parametrize("value", [8, 8.0, np.int64(8), np.int32(8), np.uint16(8), np.float64(8.0)])
def test_whole_numbers_of_any_kind(value):
    assert check_int("gpus", value, 1, 10) == 8
    assert type(check_int("gpus", value, 1, 10)) is int


@pytest.mark.parametrize("value", [True, np.bool_(True), 8.5, np.float64(8.5), "8", float("nan"),
                                   np.int64(11), None])
def test_not_whole_numbers_in_range(value):
    with pytest.raises(InputError, match="an integer from 1 to 10"):
        check_int("gpus", value, 1, 10)
