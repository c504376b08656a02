"""The slowest pipeline stage uses the same layer split as the memory model (issue 9):
Megatron-Core's account_for_embedding/loss_in_pipeline_split gives the first and the last rank
one transformer layer fewer (transformer_block.py get_num_layers_to_build)."""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.layout import Layout
from trainplan.costmodel.pipeline import stage_time


def test_edge_stages_carry_the_head_in_place_of_a_layer():
    # 126 layers, pp 16 x vp 4: middle ranks 8 layers, first and last 7 (+ embedding / head)
    L = Layout(pp=16, vp=4)
    assert stage_time(L, 126, 1.0, 0.0, 0.5) == 8.0        # a middle rank is the slowest
    assert stage_time(L, 126, 1.0, 0.0, 1.5) == 8.5        # a head heavier than a layer shows


def test_even_split_keeps_the_head_on_a_full_stage():
    L = Layout(pp=4, vp=5)                                  # 80 layers: 20 per rank
    assert stage_time(L, 80, 1.0, 0.0, 0.5) == 20.5


def test_edge_counts_add_up_to_the_model():
    # 81 layers on 2 ranks: 41 + 40, never 40 + 40; 80 on 3: 27 + 27 + 26
    assert stage_time(Layout(pp=2), 81, 1.0, 0.0, 0.0) == 41.0
    assert stage_time(Layout(pp=3), 80, 1.0, 0.0, 0.0) == 27.0


def test_no_pipeline_holds_everything_and_broadcasts():
    L = Layout(pp=np.array([1, 16]), vp=np.array([1, 4]))
    out = stage_time(L, 126, 1.0, 0.25, 0.5)
    assert np.allclose(out, [126.75, 8.0])
