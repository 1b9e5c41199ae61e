import ctypes
import faulthandler
import os
import signal
from types import SimpleNamespace

import pytest
import torch

from klineage.compare import POISON_BYTE
from klineage.guards import check_guards, guarded_empty, static_findings


def test_guarded_allocation_is_poisoned_aligned_and_checked():
    log = []
    t = guarded_empty((10, 3), (3, 1), torch.float32, "cpu", 1024, "empty", log)
    assert t.shape == (10, 3) and t.data_ptr() % 256 == 0
    assert torch.isnan(t).all()  # interior poisoned: unwritten elements read as NaN
    t.fill_(1.0)
    assert check_guards(log) is None
    end = log[0].stop
    log[0].buffer[end] = 0  # one byte past the end, inside the 256-byte rounding
    finding = check_guards(log)
    assert finding.code == "out_of_bounds_write" and "after its end" in finding.detail
    log[0].buffer[end] = POISON_BYTE
    log[0].buffer[log[0].start - 1] = 7
    assert "before its start" in check_guards(log).detail


def test_a_noise_allocation_holds_finite_values_and_keeps_its_guards():
    """A run like a user's call: the interior holds random finite values (seeded), not NaN; the guards still
    poison, so a stray store is still found."""
    log = []
    t = guarded_empty((10, 3), (3, 1), torch.float32, "cpu", 1024, "empty", log, noise=12345)
    assert torch.isfinite(t).all() and t.abs().sum() > 0
    again = guarded_empty((10, 3), (3, 1), torch.float32, "cpu", 1024, "empty", [], noise=12345)
    assert torch.equal(t, again)  # the judge's seed decides the values
    ints = guarded_empty((7,), (1,), torch.int32, "cpu", 1024, "empty", [], noise=9)
    assert ((ints >= 0) & (ints < 100)).all()
    assert check_guards(log) is None
    log[0].buffer[log[0].stop] = 0
    assert check_guards(log).code == "out_of_bounds_write"


def _store_at(distance: int) -> int:
    """In a forked child: a guarded CPU allocation, one byte stored `distance` bytes past its end (negative: before
    its start). The child's wait status."""
    pid = os.fork()
    if pid == 0:
        try:
            # a fork of a process whose OpenMP pool has run (this worker's, after other tests) deadlocks in its first
            # parallel op (GNU libgomp; seen: torch.ones(1 << 20).sum() hung here under xdist). The judge forks its
            # candidate before any parallel op; a test worker may not have: one thread in the child.
            torch.set_num_threads(1)
            faulthandler.disable()  # the fault is the expected outcome: no dump on stderr
            log = []
            t = guarded_empty((100,), (1,), torch.float32, "cpu", 64 * 1024, "empty", log)
            end = t.data_ptr() + 400 - 1
            ctypes.memset(end + distance if distance > 0 else t.data_ptr() + distance, 0, 1)
            os._exit(3 if check_guards(log) else 0)
        finally:
            os._exit(1)
    return os.waitpid(pid, 0)[1]


@pytest.mark.parametrize("distance", [64 * 1024 + 4096, 512 * 1024, -(64 * 1024 + 4096), -(1 << 20)])
def test_a_store_beyond_the_guard_faults_on_the_cpu(distance):
    """Past the poisoned guard the pages are PROT_NONE: the store cannot land unseen in someone else's memory."""
    status = _store_at(distance)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV, status


@pytest.mark.parametrize("distance", [1, 4096, 60 * 1024, -4096])
def test_a_store_inside_the_guard_is_found_by_its_poison(distance):
    status = _store_at(distance)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3, status


def test_static_scan_flags_what_runtime_cannot_see():
    src = "import ctypes\nimport os\ny = x.numpy()\nv = os.environ['SEED']\n"
    src += "torch.backends.cuda.matmul.allow_tf32 = True\n"
    details = [f.detail for f in static_findings({"program": src})]
    assert any("ctypes" in d for d in details)
    assert any("numpy()" in d for d in details)
    assert any("environ" in d for d in details)
    assert any("allow_tf32" in d for d in details)
    assert static_findings({"program": "import triton\nx = torch.empty(3)\n"}) == []


def test_a_launch_through_a_cached_compiled_kernel_is_recorded_once():
    # FlagGems's @libentry launches `compiled[grid](*args)` from its second call on: unseen, 22 of 28 wild starts
    # failed no_kernel_launch on the H200 (RESULTS.md#wild). A compiled kernel here without a GPU: its launcher and
    # handles stubbed, the launch path (CompiledKernel.__getitem__) Triton's own
    import triton
    import triton.language as tl
    from triton.compiler.compiler import CompiledKernel

    from klineage.guards import TRACER, install_tracer

    @triton.jit
    def _copy(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < N), mask=offs < N)

    install_tracer()
    ran = []
    kernel = object.__new__(CompiledKernel)
    kernel.src, kernel.name, kernel.function, kernel.packed_metadata = type("S", (), {"fn": _copy})(), "_copy", 0, 0
    kernel._init_handles = lambda: None
    kernel.launch_metadata = lambda *a: None
    kernel._run = lambda *a: ran.append(a)
    x, out = torch.ones(8), torch.empty(8)
    TRACER.active, before = True, len(TRACER.launches)
    try:
        kernel[(2, 1, 1)](x, out, 8, 4, stream=0)
        TRACER.depth += 1  # inside another launcher (JITFunction.run): that launcher records it
        kernel[(2, 1, 1)](x, out, 8, 4, stream=0)
        TRACER.depth -= 1
    finally:
        TRACER.active = False
    recorded = TRACER.launches[before:]
    assert len(ran) == 2 and len(recorded) == 1
    assert recorded[0].kernel.endswith("_copy") and recorded[0].programs == 2
    assert {x.untyped_storage().data_ptr(), out.untyped_storage().data_ptr()} <= recorded[0].storages
    assert dict(recorded[0].constexprs).get("BLOCK") == 4


def test_a_launch_argument_wrapping_a_tensor_counts_its_storage():
    # FlagGems's StridedBuffer keeps its tensor in ._base, Triton's TensorDescriptor in .base
    from klineage.guards import Tracer

    class StridedBuffer:
        def __init__(self, base):
            self._base = base

        def data_ptr(self):
            return self._base.data_ptr()

    a, b = torch.ones(4), torch.ones(4)
    tracer = Tracer(active=True)
    tracer.record(lambda: None, (StridedBuffer(a), type("D", (), {"base": b})()), {})
    assert {a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()} <= tracer.launches[0].storages


def test_a_launch_names_the_arguments_it_passed_as_python_floats():
    """A pin to fp32 of an argument passed a Python float changes no code (Triton types it fp32): the launch rows say
    which arguments those were, and only the run-time ones (a float constexpr is compiled in)."""
    import triton
    import triton.language as tl
    from triton.compiler.compiler import CompiledKernel

    from klineage.gates.candidate import launch_rows
    from klineage.guards import TRACER, install_tracer

    @triton.jit
    def _scale(x_ptr, out_ptr, N, eps, gate, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < N) * gate + eps, mask=offs < N)

    install_tracer()
    kernel = object.__new__(CompiledKernel)
    kernel.src, kernel.name, kernel.function, kernel.packed_metadata = type("S", (), {"fn": _scale})(), "_scale", 0, 0
    kernel._init_handles = lambda: None
    kernel.launch_metadata = lambda *a: None
    kernel._run = lambda *a: None
    x, out = torch.ones(8), torch.empty(8)
    TRACER.active, before = True, len(TRACER.launches)
    try:
        kernel[(2, 1, 1)](x, out, 8, 1e-6, 2, 4, stream=0)
    finally:
        TRACER.active = False
    (recorded,) = TRACER.launches[before:]
    assert recorded.floats == ("eps",)  # gate was passed an int
    (row,) = launch_rows([recorded])
    assert row["floats"] == ["eps"] and row["constexprs"] == {"BLOCK": 4}


# torchao's bsr_dense_addmm: its program builds the BSR operand from its inputs in forward, and the wrapper reads the
# parts back; the entry allows these host ops (suites/wild_quant.py)
SPARSE_HOST_OPS = frozenset({"sparse_compressed_tensor", "values", "crow_indices", "col_indices", "_nnz"})


def _bsr_parts():
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    return crow, col, torch.randn(2, 2, 2)


def _ptrs(*tensors) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors}


@pytest.mark.filterwarnings("ignore:Sparse:UserWarning")  # beta, and invariants unchecked
def test_a_sparse_or_wrapped_tensor_s_storages_are_its_parts():
    """A sparse tensor has no storage of its own (`untyped_storage()` raises): its parts have, and they are the
    tensors it was built from."""
    from klineage.guards import tensor_storages

    crow, col, values = _bsr_parts()
    bsr = torch.sparse_bsr_tensor(crow, col, values, (4, 4))
    assert tensor_storages(bsr) == _ptrs(crow, col, values)
    csc = torch.eye(3).to_sparse_csc()
    assert tensor_storages(csc) == _ptrs(csc.ccol_indices(), csc.row_indices(), csc.values())
    coo = torch.eye(3).to_sparse()
    assert tensor_storages(coo) == _ptrs(coo._indices(), coo._values())
    jagged = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
    assert tensor_storages(jagged) == _ptrs(jagged.values(), jagged.offsets())
    assert tensor_storages(torch.empty(3, device="meta")) == set()  # no data: its pointer, 0, names nothing
    assert tensor_storages(torch.empty(0)) == set()


@pytest.mark.filterwarnings("ignore:Sparse:UserWarning")  # beta, and invariants unchecked
def test_a_forward_building_a_sparse_tensor_from_its_inputs_passes_the_guards():
    """Before, the host-op provenance check asked the BSR tensor for its storage and the forward raised
    NotImplementedError. A kernel that writes the values (a launch recorded as the tracer records one) vouches for
    the values and what is read back from them, not for the host-made indices beside them."""
    from klineage.guards import TRACER, guarded_forward, launch_findings

    crow, col, values = _bsr_parts()
    with guarded_forward(1024, SPARSE_HOST_OPS) as record:
        TRACER.record(lambda: None, (values,), {})  # a kernel wrote the values
        bsr = torch.sparse_bsr_tensor(crow, col, values, (4, 4))
        parts = bsr.values(), bsr.crow_indices(), bsr.col_indices()
        assert bsr._nnz() == 2
        copied = parts[1].clone()
    assert record.banned == [] and record.derived == set()  # the views and the index copy derive nothing
    assert launch_findings(record, [parts[0]], None) is None  # the values a kernel wrote, read back
    for out in (bsr, parts[1], copied):  # the indices the host made: not a kernel's, nor a sparse tensor of them
        assert launch_findings(record, [out], None).code == "output_not_from_kernel"
    # a launch handed a sparse tensor counts its parts (a kernel cannot take one: a wrapper's own launch may)
    with guarded_forward(1024, SPARSE_HOST_OPS) as record:
        TRACER.record(lambda: None, (torch.sparse_bsr_tensor(crow, col, values, (4, 4)),), {})
    assert record.launches[0].storages == _ptrs(crow, col, values)
    assert launch_findings(record, [torch.sparse_bsr_tensor(crow, col, values, (4, 4))], None) is None


@pytest.mark.filterwarnings("ignore:Sparse:UserWarning")  # beta, and invariants unchecked
def test_an_input_written_through_a_sparse_tensor_s_parts_is_still_a_mutation():
    """A BSR tensor built in forward shares its inputs' storage: a write into its values is a write into the input,
    which the correctness gate's before/after comparison of the inputs finds (not declared in MUTATED_INPUTS)."""
    from types import SimpleNamespace

    from klineage.gates.correctness import _mutation_finding
    from klineage.guards import guarded_forward

    crow, col, values = _bsr_parts()
    inputs = [crow, col, values]
    originals = [x.clone() for x in inputs]
    with guarded_forward(1024, SPARSE_HOST_OPS) as record:
        bsr = torch.sparse_bsr_tensor(crow, col, values, (4, 4))
        bsr.values()[0].copy_(torch.zeros(2, 2))
    assert record.banned == []
    workload = SimpleNamespace(mutated_inputs=(), clobbered_inputs=())
    finding = _mutation_finding(workload, inputs, originals, None)
    assert finding is not None and finding.code == "input_mutated" and "input 2" in finding.detail


def test_a_higher_order_operator_other_than_tritons_wrappers_is_banned():
    """`torch.cond`'s eager code is not ours to vouch for: it fails as compute, named, before running a branch."""
    import torch

    from klineage.guards import TorchComputeError, guarded_forward

    x = torch.randn(4)
    with pytest.raises(TorchComputeError, match="higher-order operator cond"):
        with guarded_forward(256) as record:
            torch.cond(torch.tensor(True), lambda a: a * 2, lambda a: a + 1, (x,))
    assert record.banned == ["cond"]


def test_a_program_defined_operator_runs_its_body_under_the_ban():
    """Allowed by name (HOST_OPS), its body still may not compute with PyTorch; one that only allocates passes."""
    import torch

    from klineage.guards import TorchComputeError, guarded_forward

    lib = torch.library.Library("klineage_test_guards", "DEF")
    lib.define("compute(Tensor x) -> Tensor")
    lib.impl("compute", lambda x: x * 2, "CPU")
    lib.define("allocate(Tensor x) -> Tensor")
    lib.impl("allocate", lambda x: torch.empty_like(x), "CPU")
    x = torch.randn(4)
    with pytest.raises(TorchComputeError, match="aten.mul"):
        with guarded_forward(256, frozenset({"compute"})):
            torch.ops.klineage_test_guards.compute(x)
    with guarded_forward(256, frozenset({"allocate"})) as record:
        torch.ops.klineage_test_guards.allocate(x)
    assert [a.op for a in record.allocations] == ["empty_like"]


def test_a_launch_s_callbacks_run_under_the_ban_and_are_put_back():
    """Triton calls a kernel's pre-run hooks, the launch enter/exit hooks and the compile hooks inside its launcher,
    where the ban is off for its own work (the GPU launcher calls the last three; the interpreter none of them):
    for a watched launch each runs under the forward's guard, and the originals are back after the launch."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes
    from triton import knobs

    from klineage.guards import TorchComputeError, callbacks_watched, guarded_forward

    x = torch.randn(4)

    def compute(*args, **kwargs):
        return x * 2

    runtime = knobs.runtime
    launcher = SimpleNamespace(pre_run_hooks=[compute])
    calls = {
        "pre-run hook": lambda: [hook() for hook in launcher.pre_run_hooks],
        "enter hook": lambda: runtime.launch_enter_hook(None),
        "exit hook": lambda: runtime.launch_exit_hook(None),
        "compile hook": lambda: runtime.jit_post_compile_hook(),
    }
    before = (
        list(runtime.launch_enter_hook.calls),
        list(runtime.launch_exit_hook.calls),
        runtime.jit_post_compile_hook,
    )
    runtime.launch_enter_hook.add(compute)
    runtime.launch_exit_hook.add(compute)
    runtime.jit_post_compile_hook = compute
    try:
        for name, call in calls.items():
            with guarded_forward(256), _disable_current_modes():  # the launcher's section, nothing watched
                call()
            with pytest.raises(TorchComputeError, match="aten.mul"):
                with guarded_forward(256), callbacks_watched(True, launcher), _disable_current_modes():
                    call()
            assert launcher.pre_run_hooks == [compute], name
            assert runtime.launch_enter_hook.calls[-1] is compute and runtime.jit_post_compile_hook is compute, name
    finally:
        runtime.launch_enter_hook.calls[:] = before[0]
        runtime.launch_exit_hook.calls[:] = before[1]
        runtime.jit_post_compile_hook = before[2]
