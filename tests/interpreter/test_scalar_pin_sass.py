"""Why `ScalarDtypePin.untimed` refuses a pin whose scalars arrive as Python floats: Triton types such an argument
fp32, and the pin the transform writes then compiles to the very same machine code (RESULTS.md#wild-h100-3: KLineage
and blind spent 12 evaluations on it, x0.994-x1.008). Static, no GPU: both forms compiled for sm_90 by Triton's own
compiler and disassembled with the wheel's `nvdisasm`; a Triton release that typed or lowered the scalar otherwise
would fail here, and the rule with it."""

import re
import textwrap

import pytest

from klineage.sass import disassemble, tool
from klineage.transforms.scalar_dtype_pin import ScalarDtypePin
from tests.sm90 import compile_sm90, load_module

# a row normalization with a run-time eps, as layer, RMS and group norm take it
PLAIN = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def norm(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        y = x / tl.sqrt(tl.sum(x * x) / n + eps)
        tl.store(y_ptr + cols, y, mask=cols < n)
""")


def _sass(source: str, eps_type: str, tmp_path, name: str) -> str:
    module = load_module(source, tmp_path, name)
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "eps": eps_type, "BLOCK": "constexpr"}
    compiled = compile_sm90(module.norm, signature, {"BLOCK": 1024}, num_warps=4)
    # the instructions alone: the listing's debug sections name the source file, which differs between the two
    return "\n".join(re.findall(r"/\*[0-9a-f]{4}\*/\s+([A-Z@!][^;]*;)", disassemble(compiled.asm["cubin"])))


@pytest.mark.interpreter
@pytest.mark.skipif(tool("nvdisasm") is None, reason="no nvdisasm (Triton's wheel ships one)")
def test_a_pin_of_an_fp32_scalar_compiles_to_the_same_sass_and_of_an_fp64_one_does_not(tmp_path):
    t = ScalarDtypePin()
    (site,) = [s for s in t.optimize_sites(PLAIN) if s.after.strip().startswith("y = ")]
    pinned = t.optimize(PLAIN, site, {"dtype": "tl.float32"})
    assert "eps.to(tl.float32)" in pinned
    plain32, pinned32 = _sass(PLAIN, "fp32", tmp_path, "plain32"), _sass(pinned, "fp32", tmp_path, "pinned32")
    assert "MUFU.RSQ" in plain32 or "MUFU.SQRT" in plain32  # a real listing, not an empty one
    assert plain32 == pinned32
    # an fp64 argument (Inductor's launcher passes one) is where the pin changes the code: the rule is not vacuous
    assert _sass(PLAIN, "fp64", tmp_path, "plain64") != _sass(pinned, "fp64", tmp_path, "pinned64")
