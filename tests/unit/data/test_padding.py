

def test_the_recommendation_is_the_policy_that_wastes_least():
    """Long samples (a few per sequence) pack worse than length buckets batch: the
    recommendation named packing's efficiency whatever the numbers."""
    import numpy as np

    from trainplan.data.padding import analyze
    rng = np.random.default_rng(0)
    lengths = rng.integers(2000, 2600, 4000)
    rep = analyze(lengths, capacity=8192, batch_size=8, buckets=8)
    best = max(rep.efficiency, key=rep.efficiency.get)
    assert f"packing_efficiency = {rep.efficiency[best]:.3f}" in rep.recommendation
