"""evals.stats.stability and the audit plan: one base batch per audit; base stability is
tested across runs, where it can fail."""

from evals.plan import AUDIT_TIERS, plan_run
from evals.stats.labels import judge
from evals.stats.mmd import mmd_test
from evals.stats.stability import base_stability
from tests.test_stats_mmd import tiers


def test_an_audit_plan_no_longer_duplicates_base():
    plan = plan_run(["a", "b"], repeat=3, seed=1, tiers=AUDIT_TIERS)
    assert sorted({(p.tier, p.batch) for p in plan}) == [("base", 0), ("fast", 0)]
    assert len(plan) == 2 * 2 * 3


def test_base_stability_detects_a_base_tier_that_changed_between_runs():
    earlier, same, changed, fast = tiers(5, (0.2, 0.2, 0.5, 0.5), prompts=25, k=6, length=60)
    assert base_stability(same, earlier, B=200).p_value > 0.05
    moved = base_stability(changed, earlier, B=200)
    assert moved.p_value < 0.01
    v = judge(fast_vs_base=mmd_test(fast, changed, B=200), base_stability=moved)
    assert v.label == "no_detectable_difference"  # reported beside, never the label
    assert any(r.startswith("base now vs base in an earlier window: p = 0.005") for r in v.reasons)


def test_it_compares_only_prompts_both_runs_have():
    a, b = tiers(7, (0.2, 0.2), prompts=6, k=4, length=40)
    b = {k: v for k, v in b.items() if k < 4}
    assert base_stability(a, b, B=50).n_prompts == 4
