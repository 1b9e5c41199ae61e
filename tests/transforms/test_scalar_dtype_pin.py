import ast
import textwrap
from pathlib import Path

from klineage.transforms.scalar_dtype_pin import ScalarDtypePin
from tests.transforms.roundtrip import assert_round_trips, installed_source, simplify_all

T = ScalarDtypePin()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(X, y_ptr, n_cols, stride, eps, gate, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < n_cols).to(tl.float32)
        eps = eps.to(tl.float32)
        y = x * gate.to(tl.float32) + eps + n_cols.to(tl.float32)
        tl.store(y_ptr + cols * stride, y, mask=cols < n_cols)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(X, y_ptr, n_cols, stride, eps, gate, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < n_cols).to(tl.float32)
        eps = eps
        y = x * gate + eps + n_cols.to(tl.float32)
        tl.store(y_ptr + cols * stride, y, mask=cols < n_cols)
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    # X is a pointer by use (the base of a load address), BLOCK is a constexpr, n_cols an integer by name.
    assert [(s.before, s.after) for s in sites] == [  # shown in their statement, to tell occurrences apart
        ("eps = eps.to(tl.float32)", "eps = eps"),
        ("y = x * gate.to(tl.float32) + eps + n_cols.to(tl.float32)", "y = x * gate + eps + n_cols.to(tl.float32)"),
    ]
    assert all(s.params == {"dtype": "tl.float32"} for s in sites)
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    # n_cols and stride look like integers: not offered a float pin.
    assert [(s.line, s.after) for s in sites] == [
        (9, "eps = eps.to(tl.float32)"),
        (10, "y = x * gate.to(tl.float32) + eps + n_cols.to(tl.float32)"),
        (10, "y = x * gate + eps.to(tl.float32) + n_cols.to(tl.float32)"),
    ]
    out = T.optimize(SIMPLE, sites[0], {"dtype": "tl.float32"})
    assert "    eps = eps.to(tl.float32)\n" in out


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


def test_round_trip_bundled_rmsnorm():
    path = Path(__file__).resolve().parents[2] / "src/klineage/examples/rmsnorm/tuned.py"
    assert len(assert_round_trips(T, path.read_text())) == 1


def test_round_trip_liger():
    assert assert_round_trips(T, installed_source("liger_kernel.ops.swiglu"), limit=2)


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites("import triton.language as tl\ndef host(eps):\n    return eps.to(tl.float32)\n") == []
    assert T.sites("def broken(:\n") == []


def test_a_scalar_added_into_an_address_is_an_integer_and_never_pinned():
    """rope's `half` offsets the second half of each vector (`x_vec + half + offs`); pinned to fp32 it made a float
    pointer offset, a compile error that blind and memory each spent an evaluation on (H200, run 5)."""
    import libcst as cst

    from klineage.suites import SUITES
    from klineage.transforms.scalar_dtype_pin import scalar_params

    source = (SUITES["heldout"] / "rope" / "naive.py").read_text()
    assert not [s for s in T.optimize_sites(source) if "half" in s.before]
    (kernel,) = [
        n for n in cst.parse_module(source).body if isinstance(n, cst.FunctionDef) and n.name.value == "rope_kernel"
    ]
    assert "half" not in scalar_params(kernel)


def test_a_pointer_made_into_an_address_in_a_local_first_is_never_pinned():
    """FlagGems's reductions build each address in a local (`inp_ptrs = inp + offset`, then `tl.load(inp_ptrs)`):
    `inp` was offered a pin, `inp.to(tl.float32) + offset`, which failed to compile on the H100 (RESULTS.md#wild-h100);
    a scalar beside them still is offered."""
    source = (
        "import triton\nimport triton.language as tl\n@triton.jit\n"
        "def k(inp, out, M, eps, BLOCK: tl.constexpr):\n"
        "    offset = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    inp_ptrs = inp + offset\n"
        "    x = tl.load(inp_ptrs, mask=offset < M)\n"
        "    out_ptrs = out + offset\n"
        "    tl.store(out_ptrs, x * eps, mask=offset < M)\n"
    )
    assert [s.before for s in T.optimize_sites(source)] == ["tl.store(out_ptrs, x * eps, mask=offset < M)"]


def test_a_pin_on_an_argument_the_bench_case_passes_as_a_float_is_untimed():
    """Triton types a Python float fp32: pinned to fp32, the kernel compiles to the same code (identical SASS for an
    fp32 `eps`, Triton 3.6, sm_90), so the bench case cannot time the pin. Where a launch passes anything else, or
    no launch was seen (the CPU), the pin is offered as before."""
    eps_site, gate_site, _ = T.optimize_sites(SIMPLE)
    floats = [{"kernel": "module.k", "constexprs": {"BLOCK": 64}, "floats": ["eps", "gate"]}]
    assert "passes eps to k as a Python float" in T.untimed(SIMPLE, eps_site, floats)
    assert "passes eps, gate to k" in T.untimed(SIMPLE, gate_site, floats)  # n_cols: an integer by name, left out
    eps_only = [{"kernel": "k", "floats": ["eps"]}]
    assert T.untimed(SIMPLE, eps_site, eps_only) and T.untimed(SIMPLE, gate_site, eps_only) == ""
    assert T.untimed(SIMPLE, eps_site, [*eps_only, {"kernel": "k"}]) == ""  # one launch passed something else
    assert T.untimed(SIMPLE, eps_site, [{"kernel": "other", "floats": ["eps"]}]) == ""
    assert T.untimed(SIMPLE, eps_site, None) == ""
