"""The shape a correctness check draws from the workload's DOMAIN (gates.correctness.domain_case): one per check,
also for a workload with a single CPU case, small (bounded by DOMAIN_GROWTH), and not known in advance."""

import math

from klineage.gates.correctness import DOMAIN_GROWTH, domain_case
from klineage.workload import load_workload
from tests.adversarial.manifest import ROOT
from tests.conftest import EXAMPLES


def test_a_workload_with_one_cpu_case_gets_a_shape_of_its_own():
    wl = load_workload(ROOT / "workloads" / "scale_add.py")  # tiny (N = 1000) is its only CPU case
    drawn = [domain_case(wl, seed)["N"] for seed in range(50)]
    assert all(1000 < n <= DOMAIN_GROWTH * 1000 for n in drawn), drawn
    assert len(set(drawn)) > 10  # a program cannot hard-code the next one


def test_the_drawn_sizes_stay_within_the_budget_and_the_domain():
    for name in ("softmax", "rmsnorm", "matmul", "attention", "cross_entropy", "swiglu"):
        wl = load_workload(EXAMPLES / name / "workload.py")
        base = wl.cases[wl.seed_case("cpu")]
        named = [wl.cases[n] for n in wl.check_cases("cpu")]
        for seed in range(20):
            case = domain_case(wl, seed)
            assert case is not None, name
            sizes = [k for k, v in base.items() if type(v) is int and isinstance(wl.domain.get(k), list)]
            assert math.prod(case[k] for k in sizes) <= DOMAIN_GROWTH * math.prod(base[k] for k in sizes), case
            assert any(case[k] != base[k] for k in sizes)
            for k in sizes:
                assert base[k] <= case[k] <= DOMAIN_GROWTH * max(c[k] for c in named), (name, k, case)
            assert {k: v for k, v in case.items() if k not in sizes} == {
                k: v for k, v in base.items() if k not in sizes
            }


def test_a_walk_draws_one_shape_for_all_its_checks():
    # a walk's verdicts must not depend on the check's luck: the planted expert's deliberate bug (an unmasked path
    # wrong at cols=1536) once rejected a step it did not cause, on one check's draw (Settings.check_draw)
    from klineage.check import _key_settings
    from klineage.config import Settings
    from klineage.mine import walk_draw
    from klineage.program import load_program
    from tests.conftest import FIXTURES

    wl = load_workload(FIXTURES / "planted" / "workload.py")
    expert = load_program(FIXTURES / "planted" / "expert.py")
    draw = walk_draw(wl, expert)
    assert draw == walk_draw(wl, expert) and domain_case(wl, draw) == domain_case(wl, walk_draw(wl, expert))
    other = load_program(EXAMPLES / "rmsnorm" / "naive.py")
    assert walk_draw(wl, other) != draw
    fixed, secret = Settings(check_draw=draw), Settings()
    assert _key_settings("correctness", fixed, "sm_90") != _key_settings("correctness", secret, "sm_90")
