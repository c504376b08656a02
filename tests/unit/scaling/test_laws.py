"""The broadcasting law functions refuse inputs that would give NaN or negative results."""

import numpy as np
import pytest

from trainplan.errors import InputError
from trainplan.scaling import (deepseek_batch_size, effective_data, get_law, kaplan_critical_batch,
                               training_flops)
from trainplan.scaling.laws import KAPLAN_2020, tokens_for_compute


@pytest.mark.parametrize("call, field", [
    (lambda: training_flops(-7e9, 1e12), "n_params"),
    (lambda: training_flops(7e9, float("nan")), "tokens"),
    (lambda: tokens_for_compute(-1.0, 7e9), "flops"),
    (lambda: effective_data(1e11, -3), "epochs"),
    (lambda: get_law("epoch2024").loss(-1, 1e9), "n_params"),
    (lambda: get_law("epoch2024").optimal(float("inf")), "flops"),
    (lambda: KAPLAN_2020.loss(1e9, 0.0), "tokens"),
    (lambda: deepseek_batch_size(-1), "flops"),
    (lambda: kaplan_critical_batch(np.array([2.0, -1.0])), "loss"),
    (lambda: training_flops("seven", 1e12), "n_params"),
])
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(InputError, match=f"^{field} = "):
        call()


def test_good_inputs_still_broadcast():
    c = training_flops(np.array([1e9, 7e9]), 1e12)
    assert c.tolist() == [6e21, 4.2e22]
    assert training_flops(7e9, 0.0) == 0.0            # no tokens, no compute
    n, d = get_law("epoch2024").optimal(np.array([1e21, 1e23]))
    assert np.all(np.diff(n) > 0) and np.all(np.diff(d) > 0)
    assert effective_data(1e11, 1.0) == pytest.approx(1e11)
