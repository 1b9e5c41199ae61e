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


def test_only_names_the_kernel_has_are_carried():
    """Triton ignores a `do_not_specialize` name the kernel does not have: carrying `["eps"]` onto a kernel without
    an `eps` is a rewrite that changes nothing, and it spent an evaluation on seven FlagGems kernels in one bench."""
    t = Specialization()
    sites = {s.function: s for s in t.optimize_sites(SIMPLE_1)}
    expert = {"do_not_specialize": '["eps", "T"]', "do_not_specialize_on_alignment": '["x_ptr", 0]'}
    assert t.carry(expert, SIMPLE_1, sites["b"]) == {
        "do_not_specialize": "['eps']",
        "do_not_specialize_on_alignment": "['x_ptr']",
    }
    assert t.carry({"do_not_specialize": '["eps"]'}, SIMPLE_1, sites["c"]) is None
    assert t.variants(None, SIMPLE_1, "c", None) == []
    assert t.variants({"do_not_specialize": "['eps']"}, SIMPLE_1, "b", None) == [{"do_not_specialize": "['eps']"}]


def test_a_constexpr_is_never_carried():
    t = Specialization()
    simple = SIMPLE_0
    (site,) = [s for s in t.optimize_sites(simple) if s.function == "a"]
    assert t.carry({"do_not_specialize": '["BLOCK"]'}, simple, site) is None
    assert t.carry({"do_not_specialize": '["T"]'}, simple, site) == {"do_not_specialize": "['T']"}
