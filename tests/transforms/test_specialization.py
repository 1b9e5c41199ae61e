import textwrap
from pathlib import Path

from klineage.transforms.specialization import Specialization
from tests.transforms.roundtrip import round_trip

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "klineage" / "examples"

EXPERT = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit(do_not_specialize=["T"])
    def a(x_ptr, T, BLOCK: tl.constexpr):
        pass


    @triton.jit(debug=True, do_not_specialize=["eps"], do_not_specialize_on_alignment=["x_ptr"])
    def b(x_ptr, eps):
        pass


    @triton.jit
    def c(x_ptr):
        pass
    """
)
SIMPLE_0 = EXPERT.replace('@triton.jit(do_not_specialize=["T"])', "@triton.jit")
SIMPLE_1 = EXPERT.replace(', do_not_specialize=["eps"], do_not_specialize_on_alignment=["x_ptr"])', ")")


def test_simplify_fixture():
    t = Specialization()
    sites = t.sites(EXPERT)
    assert [(s.function, s.params) for s in sites] == [
        ("a", {"do_not_specialize": '["T"]'}),
        ("b", {"do_not_specialize": '["eps"]', "do_not_specialize_on_alignment": '["x_ptr"]'}),
    ]
    assert t.simplify(EXPERT, sites[0]) == SIMPLE_0
    assert t.simplify(EXPERT, sites[1]) == SIMPLE_1


def test_optimize_fixture():
    t = Specialization()
    plain = t.optimize_sites(SIMPLE_0)
    assert [s.function for s in plain] == ["a", "c"]
    assert t.optimize(SIMPLE_0, plain[0], {"do_not_specialize": '["T"]'}) == EXPERT
    out = t.optimize(SIMPLE_0, plain[1], {"do_not_specialize": "[0]"})
    assert "@triton.jit(do_not_specialize=[0])\ndef c(" in out


def test_round_trip_fixture():
    assert round_trip(Specialization(), EXPERT) == 2


def test_round_trip_bundled_rmsnorm():
    # The bundled RMSNorm specializes everything; exclude eps (a float that may change every call), then the
    # decorator argument must come off and back exactly.
    src = (EXAMPLES / "rmsnorm" / "tuned.py").read_text()
    t = Specialization()
    assert t.sites(src) == []
    (plain,) = t.optimize_sites(src)
    expert = t.optimize(src, plain, {"do_not_specialize": '["eps"]'})
    assert '@triton.jit(do_not_specialize=["eps"])\ndef rmsnorm_kernel(' in expert
    assert round_trip(t, expert) == 1
    assert t.simplify(expert, t.sites(expert)[0]) == src


def test_no_pattern():
    t = Specialization()
    assert t.sites("x = 1\n") == [] and t.optimize_sites("x = 1\n") == []
    assert t.optimize_sites("@functools.cache\ndef f():\n    pass\n") == []
    # the knob not last: skipped (optimize could not put it back in place)
    assert t.sites('@triton.jit(do_not_specialize=["T"], debug=True)\ndef f(T):\n    pass\n') == []
