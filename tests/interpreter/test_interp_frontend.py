"""klineage.interp._patch_frontend_overhead: the cached fast paths of Triton's frontend (block_type and tensor
construction, `_get_np_dtype`, `_unwrap_if_constexpr`, `tl.tuple.__eq__`) make what the originals make, attribute by
attribute, raise what they raise, and leave a kernel's output bit-identical (run in a sandbox child, since
TRITON_INTERPRET must be set before Triton is imported)."""

import pytest

from klineage.sandbox import Job

pytestmark = pytest.mark.interpreter


def test_fast_paths_make_what_the_originals_make(sandbox):
    result = sandbox.run(Job("tests.fixtures.interp_frontend_jobs:compare", None, env={"TRITON_INTERPRET": "1"}))
    assert result.ok, result.error + result.log
    assert result.value["mismatches"] == []
    assert result.value["checked"] > 1000  # every input, twice: the second through the caches the first filled


def test_a_kernel_s_output_is_bit_identical_without_them(sandbox):
    result = sandbox.run(Job("tests.fixtures.interp_frontend_jobs:end_to_end", None, env={"TRITON_INTERPRET": "1"}))
    assert result.ok, result.error + result.log
    assert result.value == {"same": True, "bytes": 37 * 32 * 4}
