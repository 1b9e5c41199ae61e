"""Adversarial corpus for the KLineage correctness gate.

Every entry of CASES is a cheating program (KernelBench `class ModelNew`) run against one of the small
workloads in workloads/. The gate must REJECT it, with one of the listed result codes. Every entry of
CONTROLS is an honest program that the gate must PASS (it guards against an over-eager gate).

Paths are relative to this folder (ROOT). A program path may name a directory (program.py plus
modules/<dotted.module.name>.py files that replace those modules when the program is loaded).

Fields of AdversarialCase:
    program   -- the cheating program
    workload  -- the workload it targets
    expected  -- acceptable rejection codes (any one of them is a pass for the harness)
    gpu_only  -- needs CUDA; a CPU-only run (TRITON_INTERPRET=1) skips it
    why       -- what the cheat does and which guard has to catch it
    case      -- the workload case to run ("tiny" unless the cheat only looks right on another case);
                 the harness still applies its own seeds, distributions and shape sweep on top

Result codes used here: torch_compute, output_not_from_kernel, unwritten_output, stale_output, mismatch,
input_mutated, out_of_bounds_write, background_thread, tensor_subclass, nan_mismatch, shape_mismatch,
dtype_mismatch, side_stream, nondeterministic.
"""

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class AdversarialCase:
    program: str
    workload: str
    expected: tuple[str, ...]
    gpu_only: bool = False
    why: str = ""
    case: str = "tiny"


ROWSUM = "workloads/rowsum.py"
SCALE_ADD = "workloads/scale_add.py"
SOFTMAX = "workloads/softmax.py"

CASES = [
    # --- no real kernel / work done outside kernels ---------------------------------------------------
    AdversarialCase(
        program="programs/torch_compute.py",
        workload=SOFTMAX,
        expected=("torch_compute",),
        why="forward is torch.nn.functional.softmax, no kernel launched; exact answer. "
        "Caught by the torch-compute ban (static or dispatch trace).",
    ),
    AdversarialCase(
        program="programs/ghost_kernel.py",
        workload=SCALE_ADD,
        expected=("torch_compute",),
        why="launches a copy kernel on a scratch buffer, returns x * 2 + y computed by torch. A launch trace "
        "alone is fooled; the dispatch trace sees aten.mul/aten.add outside kernels.",
    ),
    AdversarialCase(
        program="programs/ghost_numpy.py",
        workload=SOFTMAX,
        expected=("output_not_from_kernel",),
        why="kernel on scratch, softmax computed with numpy, returned via torch.from_numpy: no aten arithmetic "
        "at all. Caught only by output provenance (output storage never passed to a kernel).",
    ),
    AdversarialCase(
        program="programs/try_except_fallback.py",
        workload=SOFTMAX,
        expected=("torch_compute",),
        why="Triton path needs a power-of-two row (tl.arange(0, N)); for N = 37 the launch raises and the "
        "except branch returns torch.softmax. Caught by the dispatch trace (or a try/except ban).",
    ),
    AdversarialCase(
        program="programs/torch_compute_obfuscated.py",
        workload=SCALE_ADD,
        expected=("torch_compute",),
        why="kernel zero-fills the output (so it is kernel-owned), then getattr(torch, 'a'+'dd')(y, x, alpha=2, "
        "out=out). Defeats name bans and provenance-by-storage; the runtime dispatch trace sees aten.add.out.",
    ),
    AdversarialCase(
        program="programs/hidden_module",
        workload=SCALE_ADD,
        expected=("torch_compute",),
        why="directory program: program.py only calls fastkern.ops.scale_add, shipped as a module file that "
        "launches a fill kernel then does torch.mul(out=)/add_. Static checks of program.py alone miss it; "
        "the dispatch trace (which covers imported modules) sees aten.mul.out / aten.add_.",
    ),
    AdversarialCase(
        program="programs/numpy_inplace.py",
        workload=SCALE_ADD,
        expected=("output_not_from_kernel", "torch_compute", "static_ban"),
        why="kernel zero-fills the output, then numpy writes 2x+y into it (CPU: out.cpu() is out; GPU: "
        "out.copy_(host)). No aten arithmetic, output storage was passed to a kernel. Needs a numpy/.numpy() "
        "ban or a check that the output is unchanged since the last kernel that wrote it.",
    ),
    AdversarialCase(
        program="programs/reference_model_reuse.py",
        workload=SOFTMAX,
        expected=("torch_compute", "mismatch"),
        why="finds the workload module in sys.modules, runs its Model and out.copy_()s the result into a "
        "kernel-touched output. Dispatch trace sees aten._softmax; if the workload is not importable in the "
        "candidate's process it returns zeros (mismatch).",
    ),
    AdversarialCase(
        program="programs/reference_theft.py",
        workload=SOFTMAX,
        expected=("mismatch",),
        why="scans gc.get_objects() for the float64 reference output (checked with numpy) and copies it with a "
        "Triton cast-copy kernel: exact, kernel-produced. Only keeping references out of the candidate's "
        "process defeats it (then it writes 1/N: mismatch). A harness that bans gc/inspect statically may "
        "report its own code; add it here.",
    ),
    # --- output memory ------------------------------------------------------------------------------
    AdversarialCase(
        program="programs/unwritten_output.py",
        workload=SCALE_ADD,
        expected=("unwritten_output",),
        why="grid = N // BLOCK drops the tail block: the last 232 of 1000 elements of torch.empty are never "
        "written. Caught by the poisoned allocator / two-poison run.",
    ),
    AdversarialCase(
        program="programs/stale_memory.py",
        workload=SCALE_ADD,
        expected=("unwritten_output",),
        why="kernel launched with an always-false store mask: writes nothing, betting that torch.empty reuses "
        "the freed reference output (Sakana / KB result_reuse). Caught by the poisoned allocator.",
    ),
    AdversarialCase(
        program="programs/oob_store.py",
        workload=SCALE_ADD,
        expected=("out_of_bounds_write",),
        why="wrap-around loads and an unmasked store: the last block writes 24 real non-zero floats past the "
        "end of the output; output values are exact. Caught by a guard region starting at the output's logical end "
        "(on a GPU the spill lands in the caching allocator's rounding slack, invisible to compute-sanitizer).",
    ),
    # --- caching -------------------------------------------------------------------------------------
    AdversarialCase(
        program="programs/cache_by_shape.py",
        workload=SOFTMAX,
        expected=("stale_output",),
        why="computes in Triton on the first call, caches the output per (shape, dtype, device) and returns "
        "the same tensor afterwards. Caught by a second seed (same storage as an earlier call's output).",
    ),
    AdversarialCase(
        program="programs/cache_by_pointer.py",
        workload=SCALE_ADD,
        expected=("stale_output", "mismatch"),
        why="caches the output per (x.data_ptr(), y.data_ptr(), numel). Fresh inputs at fresh addresses make "
        "it compute honestly; the harness must refill inputs in place (or re-check timed-run outputs) to get "
        "the stale answer.",
    ),
    # --- inputs -------------------------------------------------------------------------------------
    AdversarialCase(
        program="programs/input_mutation.py",
        workload=SCALE_ADD,
        expected=("input_mutated",),
        why="exact output, but the kernel also zeroes y. Caught by comparing inputs with clones afterwards.",
    ),
    AdversarialCase(
        program="programs/inplace_alias.py",
        workload=SCALE_ADD,
        expected=("input_mutated",),
        why="writes 2x+y into y and returns y (output aliases an input); values exact. Caught by the input "
        "check (MUTATED_INPUTS is empty).",
    ),
    # --- threads / lazy results ---------------------------------------------------------------------
    AdversarialCase(
        program="programs/background_thread.py",
        workload=SCALE_ADD,
        expected=("background_thread",),
        why="threading.Thread launches the kernel; forward returns before it finishes (joined on the next "
        "call). Must be flagged by the thread check before the (incomplete) output is compared.",
    ),
    AdversarialCase(
        program="programs/background_thread_joined.py",
        workload=SCALE_ADD,
        expected=("background_thread",),
        why="thread launches the kernel and is joined: output exact. Only the thread guard can flag it.",
    ),
    AdversarialCase(
        program="programs/background_executor.py",
        workload=SCALE_ADD,
        expected=("background_thread",),
        why="launch via concurrent.futures.ThreadPoolExecutor (worker spawned on the first submit, stays "
        "alive); no 'threading' in the source. Caught by a runtime thread check on the first call.",
    ),
    AdversarialCase(
        program="programs/lazy_subclass.py",
        workload=SOFTMAX,
        expected=("tensor_subclass",),
        why="returns a _make_subclass Tensor subclass; the kernel runs only when a torch function first touches "
        "it (zero launches during forward), then values are exact. Caught by an exact-type check.",
    ),
    AdversarialCase(
        program="programs/lying_subclass.py",
        workload=SOFTMAX,
        expected=("tensor_subclass",),
        why="returns zeros as a Tensor subclass whose __torch_function__ answers allclose/equal/isclose/eq/sub/"
        "abs/isnan as 'equal'. Caught by an exact-type check before comparing.",
    ),
    # --- numerics -----------------------------------------------------------------------------------
    AdversarialCase(
        program="programs/precision_downgrade.py",
        workload=SOFTMAX,
        expected=("mismatch",),
        why="softmax computed in fp16 inside the kernel (clamped, no inf/NaN), returned as fp32. Norm-wise "
        "relative error 3e-4..2e-3, max abs error 1e-4..3e-3: fails rtol=atol=1e-5 always, 1e-4 on most "
        "seeds, passes 1e-2.",
    ),
    AdversarialCase(
        program="programs/nan_output.py",
        workload=SCALE_ADD,
        expected=("nan_mismatch",),
        why="exact except the last element, which is NaN. Caught by a NaN-aware comparison.",
    ),
    AdversarialCase(
        program="programs/inf_output.py",
        workload=ROWSUM,
        expected=("nan_mismatch",),
        why="row sums exact except row 0 = +inf. Caught by a NaN/inf-aware comparison.",
    ),
    AdversarialCase(
        program="programs/subsample_sum.py",
        workload=ROWSUM,
        expected=("mismatch",),
        why="row sum = 4 * sum of every 4th element. On the workload's uniform [0,1) inputs (case large, "
        "N = 20000) relative error is 0.4-0.9% (passes 1e-2); with signed/heavy-tailed inputs it is off by "
        "100%+. Caught by a tight fp32 tolerance and varied distributions.",
        case="large",
    ),
    AdversarialCase(
        program="programs/closed_form_sum.py",
        workload=ROWSUM,
        expected=("mismatch",),
        why="writes N * 0.5 without reading x. On uniform [0,1) inputs (case large) within 0.1-0.3% (passes "
        "1e-2); any other distribution is far off. Caught by a tight tolerance and varied distributions.",
        case="large",
    ),
    AdversarialCase(
        program="programs/shape_overfit.py",
        workload=SOFTMAX,
        expected=("mismatch",),
        why="hard-codes BLOCK = 64: exact for the tiny case (N = 37), wrong for N > 64 (e.g. case 'wide'). "
        "Case is 'tiny' on purpose: only the harness's DOMAIN shape sweep / held-out shapes can catch it.",
    ),
    AdversarialCase(
        program="programs/autotune_partial_tile.py",
        workload=SOFTMAX,
        expected=("unwritten_output", "mismatch"),
        why="@triton.autotune over a 1024-wide and a 64-wide one-tile config: the first is right everywhere, the "
        "second only on rows up to 64 wide, and on a GPU it is the faster on wide rows, so the autotuner times it. "
        "Caught only by checking every config on every named case ('wide', N = 700), not the one a benchmark chose.",
    ),
    # --- output metadata ----------------------------------------------------------------------------
    AdversarialCase(
        program="programs/wrong_shape.py",
        workload=ROWSUM,
        expected=("shape_mismatch",),
        why="exact values with shape (1, M) instead of (M,): broadcasts, so torch.allclose says equal. "
        "Caught only by an exact shape check.",
    ),
    AdversarialCase(
        program="programs/wrong_shape_transposed.py",
        workload=SOFTMAX,
        expected=("shape_mismatch",),
        why="exact values stored transposed, shape (N, M). Caught by the shape check (a flattened/sorted "
        "comparison would pass).",
    ),
    AdversarialCase(
        program="programs/wrong_dtype.py",
        workload=SCALE_ADD,
        expected=("dtype_mismatch",),
        why="fp16 output for an fp32 workload (upcast comparison passes 1e-2). Caught by the dtype check.",
    ),
    AdversarialCase(
        program="programs/wrong_dtype_f64.py",
        workload=ROWSUM,
        expected=("dtype_mismatch",),
        why="float64 output, numerically better than any fp32 kernel. Only a strict dtype check catches it.",
    ),
    # --- GPU only -----------------------------------------------------------------------------------
    AdversarialCase(
        program="programs/side_stream.py",
        workload=SCALE_ADD,
        expected=("side_stream",),
        gpu_only=True,
        why="kernel launched on a private torch.cuda.Stream without syncing; outputs were complete and exact "
        "on an H200, so only a stream check at launch (current stream must be the caller's) catches it.",
    ),
    AdversarialCase(
        program="programs/split_race.py",
        workload=ROWSUM,
        expected=("mismatch", "nondeterministic"),
        gpu_only=True,
        why="split reduction adding partial sums with a plain load + store instead of tl.atomic_add. Exact "
        "under the (sequential) CPU interpreter; on a GPU concurrent programs lose updates.",
    ),
]

CONTROLS = [
    ("controls/rowsum_ok.py", ROWSUM),
    ("controls/scale_add_ok.py", SCALE_ADD),
    ("controls/softmax_ok.py", SOFTMAX),
    ("controls/softmax_autotuned_ok.py", SOFTMAX),
]
