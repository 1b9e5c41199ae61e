"""Forward condition checks against a workload's domain, and the launch-time guard for a partial one."""

from klineage.conditions import GATED, HOLDS, PARTIAL, VIOLATED, decide, guarded
from klineage.workload import load_workload
from tests.conftest import EXAMPLES, FIXTURES

OPT = FIXTURES / "optimize"


def _decide(pred, wl, source="", kernel=None):
    return decide(pred, load_workload(wl), source, kernel, "cpu", "sm_90")


def test_divisibility_is_partial_on_a_ranged_domain():
    assert _decide("divisible_by_block", EXAMPLES / "matmul" / "workload.py").verdict == PARTIAL


def test_layouts_decide_contiguity_and_alignment():
    assert _decide("contiguous", EXAMPLES / "softmax" / "workload.py").verdict == HOLDS
    assert _decide("contiguous", OPT / "scale_workload.py").verdict == PARTIAL
    assert _decide("aligned_16", OPT / "scale_workload.py").verdict == PARTIAL


def test_dtypes():
    assert _decide("dtype_fp32", OPT / "rowsum_workload.py").verdict == HOLDS
    assert _decide("dtype_bf16", OPT / "rowsum_workload.py").verdict == VIOLATED
    assert _decide("dtype_fp16", EXAMPLES / "softmax" / "workload.py").verdict == PARTIAL


def test_an_atomic_kernel_is_not_idempotent():
    source = (OPT / "rowsum_naive.py").read_text()
    decision = _decide("idempotent_launch", OPT / "rowsum_workload.py", source, "rowsum_kernel")
    assert decision.verdict == VIOLATED and "atomic" in decision.reason
    assert (
        _decide(
            "idempotent_launch", OPT / "scale_workload.py", (OPT / "scale_naive.py").read_text(), "scale_kernel"
        ).verdict
        == HOLDS
    )


def test_in_place_workload_violates_no_aliasing():
    assert _decide("no_aliasing", EXAMPLES / "cross_entropy" / "workload.py").verdict == VIOLATED


def test_gate_checked_predicates_are_left_to_the_gates():
    assert _decide("tolerance", OPT / "scale_workload.py").verdict == GATED
    assert _decide("shared_memory_fits", OPT / "scale_workload.py").verdict == GATED


def test_guard_keeps_both_kernels_and_dispatches_on_the_tensor_arguments():
    source = (OPT / "scale_naive.py").read_text()
    optimized = source.replace("    offs = tl.program_id(0)", "    offs = 1 + tl.program_id(0)")  # any kernel change
    out = guarded(source, optimized, "scale_kernel", "contiguous")
    assert out is not None
    compile(out, "guarded", "exec")
    assert "def scale_kernel(" in out and "def scale_kernel_when_contiguous(" in out
    assert "if _klineage_all_contiguous(x, y, N, x.stride(0)):" in out
    assert "scale_kernel_when_contiguous[(triton.cdiv(N, 128),)]" in out
    assert guarded(source, optimized, "scale_kernel", "divisible_by_block") is None  # no run-time check for it


def test_a_size_is_in_a_domain_by_its_range_or_its_listed_values():
    from klineage.conditions import size_in_domain

    domain = {"M": [1, 8192], "D": [16, 32, 64, 128, 256], "P": [64, 64], "dtype": ["bfloat16"]}
    assert size_in_domain(domain, "M", 4097) and not size_in_domain(domain, "M", 8193)
    # a list of more than two values is the allowed set, not a range (run 24 re-checked the rotary embedding at 33)
    assert size_in_domain(domain, "D", 64) and not size_in_domain(domain, "D", 33)
    assert size_in_domain(domain, "P", 64) and not size_in_domain(domain, "P", 65)  # [64, 64]: one value
    assert size_in_domain(domain, "dtype", "float16") and size_in_domain(domain, "N", 7)  # not sized here


def test_the_escape_recheck_skips_a_probe_outside_a_listed_domain():
    from klineage.bench.references import _in_domain
    from klineage.workload import load_workload
    from tests.conftest import ROOT

    rope = load_workload(ROOT / "src/klineage/suites/heldout/rope/workload.py")
    odd = {"name": "even sizes + 1", "case": {"B": 3, "S": 5, "H": 3, "D": 33, "dtype": "bfloat16"}}
    assert not _in_domain(odd, rope)
    assert _in_domain({**odd, "case": {**odd["case"], "D": 32}}, rope)


def test_every_predicate_has_a_decider_or_says_why_it_has_none():
    """`decide` is a registry (predicate -> decider); a predicate without one is a property of the code that the
    gates judge, and says so in CODE_PROPERTIES."""
    from klineage.conditions import CODE_PROPERTIES, DECIDERS
    from klineage.transform import CONDITIONS

    for predicate in CONDITIONS:
        assert (predicate in DECIDERS) != (predicate in CODE_PROPERTIES), predicate
    assert set(DECIDERS) | set(CODE_PROPERTIES) == set(CONDITIONS)
    assert all(why for why in CODE_PROPERTIES.values())
