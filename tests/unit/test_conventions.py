"""A capacity is shown as the fit check uses it: an H100's 79.65 GiB is not printed as "80"."""

from trainplan import estimate
from trainplan.conventions import capacity_text


def test_whole_capacities_stay_whole_and_others_keep_their_hundredths():
    assert capacity_text(80.0) == "80" and capacity_text(79.65) == "79.65"
    assert capacity_text(44.99) == "44.99" and capacity_text(140.0) == "140"


def test_the_estimates_one_line_names_the_capacity_it_checked():
    e = estimate(model="llama-3-8b", gpu="h100", gpus=8)
    assert e.memory.capacity_gib == 79.65
    assert "/79.65 " in repr(e)
