"""Published allocations and hand-worked numbers for each law and each 'beyond compute-optimal' tool."""

import math

import numpy as np
import pytest

from trainplan.errors import InputError
from trainplan.scaling import (
    EPOCH_2024,
    HOFFMANN_A3,
    HOFFMANN_A3_UNROUNDED,
    KAPLAN_2020,
    MUENNIGHOFF_2023,
    optimal_allocation,
    batch_advice,
    compute_optimal,
    data_constrained_optimum,
    deepseek_batch_size,
    deepseek_learning_rate,
    effective_data,
    gas_heuristic,
    get_law,
    inference_aware,
    isoflop_curve,
    kaplan_critical_batch,
    multimodal_advice,
    multimodal_heuristic_params,
    shukor_scale,
    tokens_with_padding,
)

# Hoffmann et al. 2022, Table 3 (Approach 1): (parameters, FLOPs, tokens).
TABLE3 = [
    (400e6, 1.92e19, 8.0e9),
    (1e9, 1.21e20, 20.2e9),
    (10e9, 1.23e22, 205.1e9),
    (67e9, 5.76e23, 1.5e12),
    (175e9, 3.85e24, 3.7e12),
    (280e9, 9.90e24, 5.9e12),
    (520e9, 3.43e25, 11.0e12),
    (1e12, 1.27e26, 21.2e12),
    (10e12, 1.30e28, 216.2e12),
]


@pytest.mark.parametrize("n, c, d", TABLE3)
def test_hoffmann_2022_table3_approach1_within_5pct(n, c, d):
    """Hoffmann et al. 2022 Table 3: every row's parameters and tokens within 5%."""
    a = optimal_allocation(c, "hoffmann2022-a1")
    assert a.n_params == pytest.approx(n, rel=0.05)
    assert a.tokens == pytest.approx(d, rel=0.05)


def test_hoffmann_table3_gopher_row_example():
    """Table 3: 5.76e23 FLOPs -> about 67B parameters and 1.5T tokens."""
    a = optimal_allocation(5.76e23, "hoffmann2022-a1")
    assert a.n_params == pytest.approx(67e9, rel=0.05) and a.tokens == pytest.approx(1.5e12, rel=0.05)


def test_hoffmann_table2_exponents():
    """Hoffmann et al. 2022 Table 2: a = 0.50 (Approach 1), 0.49 (Approach 2), 0.46 (Approach 3)."""
    c = np.array([1e21, 1e25])
    for name, a in [("hoffmann2022-a1", 0.50), ("hoffmann2022-a2", 0.49)]:
        n, _ = get_law(name).optimal(c)
        assert math.log(n[1] / n[0]) / math.log(c[1] / c[0]) == pytest.approx(a, abs=1e-9)
    assert HOFFMANN_A3.a == pytest.approx(0.452, abs=0.001)  # printed (rounded) values: 0.28/0.62
    assert HOFFMANN_A3_UNROUNDED.a == pytest.approx(0.46, abs=0.005)


def test_kaplan_frontier_exponent_0_73():
    """Kaplan et al. 2020 Fig. 14 / §6: N_opt grows as C^0.73 (non-embedding, C in PF-days)."""
    c = np.geomspace(1e19, 1e25, 7)
    n, d = KAPLAN_2020.optimal(c)
    slope = np.polyfit(np.log(c), np.log(n), 1)[0]
    assert slope == pytest.approx(0.73, abs=1e-9)
    assert np.polyfit(np.log(c), np.log(d), 1)[0] == pytest.approx(0.27, abs=1e-9)
    # 1 PF-day -> 1.3e9 non-embedding parameters
    assert KAPLAN_2020.optimal(8.64e19)[0] == pytest.approx(1.3e9)


def test_allocations_at_2_3e21_match_hand_arithmetic():
    """science_constants.json 'allocations_at_C_2.3e21_derived' (science.md §B.7)."""
    expect = {"hoffmann2022-a3": (2.66e9, 54.3), "hoffmann2022-a3-unrounded": (3.24e9, 36.5), "epoch2024": (4.26e9, 21.1)}
    for name, (n, tpp) in expect.items():
        a = optimal_allocation(2.3e21, name)
        assert a.n_params == pytest.approx(n, rel=0.01)
        assert a.tokens_per_param == pytest.approx(tpp, rel=0.01)
    assert optimal_allocation(2.3e21, "kaplan2020").n_params == pytest.approx(1.43e10, rel=0.01)


def test_parametric_frontier_is_the_isoflop_minimum():
    """Hoffmann eq. 4 closed form equals the numerical minimum of L(N, C/6N)."""
    for law in (EPOCH_2024, HOFFMANN_A3):
        c = 1e22
        curve = isoflop_curve(c, law, n_points=2001, span=10)
        n_opt, _ = law.optimal(c)
        assert curve.n_at_min == pytest.approx(n_opt, rel=0.01)


def test_every_named_law_respects_6nd():
    for a in compute_optimal(3e22):
        assert 6 * a.n_params * a.tokens == pytest.approx(3e22)
        assert a.tokens_per_param == pytest.approx(a.tokens / a.n_params)
    assert isoflop_curve(3e22, "hoffmann2022-a1") is None  # no loss function published


def test_epoch_chinchilla_point_loss_by_hand():
    # E + A/N^alpha + B/D^beta at Chinchilla (70B, 1.4T), by hand.
    expected = 1.8172 + 482.01 / 70e9**0.3478 + 2085.43 / 1.4e12**0.3658
    assert EPOCH_2024.loss(70e9, 1.4e12) == pytest.approx(expected)


def test_unknown_law_and_bad_flops():
    with pytest.raises(InputError, match="law"):
        get_law("nope")
    with pytest.raises(InputError):
        optimal_allocation(-1.0)
    with pytest.raises(InputError):
        optimal_allocation(float("nan"))


# ---- repeated data: Muennighoff et al. 2023 ----------------------------------------------


def test_muennighoff_effective_data_by_hand():
    """D' = U + U R*(1 - e^(-R/R*)), R* = 15.387756: 3 epochs -> 2.875 U, 4 -> 3.726 U (science.md claim 11)."""
    assert effective_data(1.0, 1.0) == pytest.approx(1.0)
    assert effective_data(1.0, 3.0) == pytest.approx(2.8755, abs=1e-4)
    assert effective_data(1.0, 4.0) == pytest.approx(3.7257, abs=1e-4)
    assert effective_data(1.0, 1e6) == pytest.approx(1 + 15.387756, rel=1e-6)


def test_data_constrained_optimum():
    unconstrained = data_constrained_optimum(1e22, 1e14)
    assert not unconstrained.data_limited
    n0, _ = MUENNIGHOFF_2023.optimal(1e22)
    assert unconstrained.n_params == pytest.approx(n0, rel=1e-3)
    limited = data_constrained_optimum(1e22, 1e10)
    assert limited.data_limited and limited.epochs > 1
    assert limited.loss > unconstrained.loss
    # With scarce data, fewer tokens of value: the best model is smaller than compute-optimal
    # (Muennighoff et al. 2023 Fig. 3: excess parameters decay faster than repeated tokens).
    assert limited.n_params < n0
    assert 6 * limited.n_params * limited.tokens == pytest.approx(1e22)


def test_repeated_data_answers_stay_inside_the_model_sizes_searched():
    """One unique token at 1e22 FLOPs: the planned model (C = 6ND) would have 5.6e20 parameters and
    the 'best' one sits on the search bracket's edge; both are refused naming the field."""
    from trainplan.scaling.repeated_data import planned_epochs

    with pytest.raises(InputError) as e:
        planned_epochs(1e22, 1.0, 3.0)
    assert e.value.field == "unique_tokens x epochs" and "1.67e+05 and 1.67e+15" in e.value.valid
    with pytest.raises(InputError) as e:
        data_constrained_optimum(1e22, 1.0)
    assert e.value.field == "unique_tokens"
    ok = planned_epochs(1e22, 1e9, 3.0)           # 556B parameters on 3B tokens: inside the range
    assert ok.n_params == pytest.approx(1e22 / (6 * 3e9))


# ---- inference-aware: Sardana and Frankle 2023 ------------------------------------------


def test_sardana_frankle_13b_example():
    """Sardana & Frankle 2023: a 13B Chinchilla-quality model at 2T inference tokens -> ~7B, saving ~1.7e22 FLOPs (~17%)."""
    law = HOFFMANN_A3_UNROUNDED
    c13 = 6 * (13e9 / law.G) ** (1 / law.a)  # budget whose compute-optimal N is 13B
    r = inference_aware(2e12, flops=c13, law=law)
    assert r.chinchilla_n_params == pytest.approx(13e9, rel=1e-6)
    assert r.n_params == pytest.approx(7e9, rel=0.05)
    assert r.flops_saved == pytest.approx(1.7e22, rel=0.1)
    assert r.fraction_saved == pytest.approx(0.17, abs=0.02)
    # Same quality by construction.
    assert law.loss(r.n_params, r.tokens) == pytest.approx(r.target_loss, rel=1e-9)


def test_inference_aware_warns_beyond_the_validated_tokens_per_parameter():
    """Sardana et al. (arXiv:2401.00448 v2) checked quality up to 10,000 tokens per parameter:
    beyond it the answer carries a warning; at the paper's own example it carries none."""
    far = inference_aware(1e30, flops=1e22, law=EPOCH_2024)
    assert far.tokens / far.n_params > 1e4 and far.warnings and "10,000" in far.warnings[0]
    assert far.to_dict()["warnings"] == list(far.warnings)
    assert not inference_aware(2e12, flops=1e22, law=EPOCH_2024).warnings


def test_inference_aware_no_inference_is_chinchilla():
    r = inference_aware(0.0, flops=1e22, law=EPOCH_2024)
    n0, _ = EPOCH_2024.optimal(1e22)
    assert r.n_params == pytest.approx(n0, rel=1e-3)
    assert r.fraction_saved == pytest.approx(0.0, abs=1e-6)


# ---- batch and learning rate ----------------------------------------------------------


def test_deepseek_and_kaplan_batch_by_hand():
    """DeepSeek LLM 2024: B_opt = 0.2920 C^0.3271, eta = 0.3118 C^-0.125; Kaplan eq. 1.4: B_crit(2.5) ~ 2.5M tokens."""
    assert deepseek_batch_size(2.3e21) == pytest.approx(2.84e6, rel=0.01)
    assert deepseek_learning_rate(2.3e21) == pytest.approx(6.66e-4, rel=0.01)
    assert kaplan_critical_batch(2.5) == pytest.approx(2e8 / 2.5 ** (1 / 0.21))
    assert kaplan_critical_batch(2.5) == pytest.approx(2.5e6, rel=0.03)


def test_gas_heuristic_is_labelled():
    """Source document's rule: ceil(sqrt(1024/4)) = 16 (science.md §B.6)."""
    assert gas_heuristic(1024) == 16
    adv = batch_advice(2.3e21, seq_len=4096, global_batch=1024)
    assert adv.gas_heuristic == 16
    assert "HEURISTIC" in adv.gas_heuristic_warning and "fixed global batch" in adv.gas_heuristic_warning
    assert adv.deepseek_batch_sequences == pytest.approx(adv.deepseek_batch_tokens / 4096)


# ---- multimodal ---------------------------------------------------------------------------


def test_shukor_exponents():
    """Shukor et al. 2025 Table 2: early fusion N ~ C^0.526, D ~ C^0.468; late fusion N ~ C^0.636."""
    n, d = shukor_scale(1e22, 1e20, 1e9, 2e10, "early")
    assert n == pytest.approx(1e9 * 100**0.526) and d == pytest.approx(2e10 * 100**0.468)
    n, _ = shukor_scale(1e22, 1e20, 1e9, 2e10, "late")
    assert n == pytest.approx(1e9 * 100**0.636)
    with pytest.raises(InputError):
        shukor_scale(1e22, 1e20, 1e9, 2e10, "middle")


def test_multimodal_heuristic_and_padding():
    assert multimodal_heuristic_params(1e9, 0.2, 0.12) == pytest.approx(1e9 * 1.2 / 0.88)
    assert tokens_with_padding(88.0, 0.12) == pytest.approx(100.0)
    adv = multimodal_advice(1e22, padding=0.12, gamma=0.2)
    assert "HEURISTIC" in adv.heuristic_warning
    assert adv.tokens_to_process == pytest.approx(adv.base_tokens / 0.88)
    with pytest.raises(InputError):
        multimodal_advice(1e22, padding=1.2)


def test_flop_counts_use_one_definition_of_6nd():
    from trainplan.costmodel.flops import six_nd
    from trainplan.scaling.laws import FLOPS_PER_PARAM_TOKEN, PF_DAY_FLOPS, tokens_for_compute, training_flops

    assert FLOPS_PER_PARAM_TOKEN == 6.0 and PF_DAY_FLOPS == 8.64e19  # Kaplan et al. 2020: 1 PF-day = 8.64e19 FLOPs
    assert training_flops([7e9], [1.4e12])[0] == six_nd(7e9, 1.4e12)
    assert tokens_for_compute(training_flops(7e9, 1.4e12), 7e9) == pytest.approx(1.4e12)
    r = inference_aware(2e12, flops=1e23, law=HOFFMANN_A3_UNROUNDED)
    assert r.train_flops == pytest.approx(6 * r.n_params * r.tokens)
    assert r.inference_flops == pytest.approx(2 * r.n_params * 2e12)
    assert r.total_flops == pytest.approx(r.train_flops + r.inference_flops)
    assert r.chinchilla_train_flops == pytest.approx(1e23)
    m = multimodal_advice(1e22, padding=0.2)
    assert m.padding_flops == pytest.approx(6 * m.base_n_params * (m.tokens_to_process - m.base_tokens))


def test_a_multimodal_reference_must_be_a_6nd_optimum():
    """A reference 60x off C = 6ND was scaled to 59x the budget without a word."""
    from trainplan.errors import InputError
    from trainplan.scaling.multimodal import multimodal_advice
    with pytest.raises(InputError, match="6 x ref_n_params x ref_tokens"):
        multimodal_advice(1e22, ref_flops=1e20, ref_n_params=1e9, ref_tokens=1e12)
    a = multimodal_advice(1e22, ref_flops=6e21, ref_n_params=1e9, ref_tokens=1e12)
    assert 0.5 < 6 * a.scaled_n_params * a.scaled_tokens / 1e22 < 2.0


def test_padding_stays_inside_the_budget():
    """The allocation was made for the whole budget and the padding tokens added on top
    (13.6% over at 12% padding)."""
    from trainplan.scaling.multimodal import multimodal_advice
    a = multimodal_advice(1e22, fusion="late", padding=0.12)
    assert 6 * a.base_n_params * a.tokens_to_process == pytest.approx(1e22, rel=1e-6)
    assert a.padding_flops == pytest.approx(0.12e22, rel=1e-6)
