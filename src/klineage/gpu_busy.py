"""The GPU's own account of how busy it was, read through NVML from the judge's process.

The profile gate's judge times a candidate's calls back to back by its own clock (gates.profile.judge_clock): an
upper bound on a call's device time that the candidate cannot lower. Where the candidate's event-timed figure is far
under it, either the candidate's clock lies (a patched `elapsed_time`) or the call's host path is the slower: a
library wrapper that does host work around a short kernel (FlagGems's `max_dim` builds a namedtuple class and asks
its tuner on every call, 0.0625 ms on the device against 0.3746 ms a call back to back on a loaded H100:
RESULTS.md#wild-h100-2). NVML's utilization samples tell them apart from outside the candidate: the share of a
sample period in which any kernel ran. The busy share of the judge's loop times its per-call figure is the device's
time per call, whatever host work pads it, so a candidate cannot lower it but by doing less work on the device.

NVML comes with the driver (`libnvidia-ml.so.1`); where it cannot be loaded or answers no samples, the share is
unknown and the caller decides as without it."""

from __future__ import annotations

import ctypes
import statistics
from dataclasses import dataclass

NVML_SUCCESS = 0
NVML_GPU_UTILIZATION_SAMPLES = 1
# nvmlValueType_t: which member of the nvmlValue_t union a sample holds
_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class _Value(ctypes.Union):
    _fields_ = [
        ("dVal", ctypes.c_double),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("siVal", ctypes.c_int),
        ("usVal", ctypes.c_ushort),
    ]


class _Sample(ctypes.Structure):
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("sampleValue", _Value)]


@dataclass(frozen=True)
class Busy:
    """How busy the GPU was over a window: `share` in [0, 1] (None: unknown, `why` says so), from `samples` NVML
    utilization samples inside it."""

    share: float | None
    samples: int = 0
    why: str = ""

    def as_dict(self) -> dict:
        return {"share": self.share, "samples": self.samples, **({"why": self.why} if self.why else {})}


def share_within(samples: list[tuple[int, float]], start_us: int, end_us: int) -> Busy:
    """The mean utilization of the samples taken inside (start_us, end_us], as a share. Each sample covers the
    period before its timestamp, so the first one inside may reach back before the window: it is dropped, and at
    least one must be left."""
    inside = sorted((t, v) for t, v in samples if start_us < t <= end_us)[1:]
    if not inside:
        return Busy(None, 0, f"no NVML utilization sample wholly inside the {(end_us - start_us) / 1e6:.2f} s window")
    return Busy(min(max(statistics.fmean(v for _, v in inside) / 100.0, 0.0), 1.0), len(inside))


class Nvml:
    """The driver's NVML library, for one device named by its UUID (as CUDA reports it: the same GPU whatever
    CUDA_VISIBLE_DEVICES numbers it)."""

    def __init__(self, uuid: str) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        self.handle = ctypes.c_void_p()
        self._check(self.lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(self.handle)), "GetHandleByUUID")

    def _check(self, code: int, what: str) -> None:
        if code != NVML_SUCCESS:
            raise OSError(f"NVML {what} returned {code}")

    def utilization_samples(self, since_us: int) -> list[tuple[int, float]]:
        """The GPU utilization samples NVML holds after `since_us` (CPU time, microseconds): (timestamp, percent)."""
        kind, count = ctypes.c_int(), ctypes.c_uint()
        get = self.lib.nvmlDeviceGetSamples
        get.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_ulonglong,
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(_Sample),
        ]
        code = get(self.handle, NVML_GPU_UTILIZATION_SAMPLES, since_us, ctypes.byref(kind), ctypes.byref(count), None)
        if code != NVML_SUCCESS or count.value == 0:
            return []
        buffer = (_Sample * count.value)()
        self._check(get(self.handle, NVML_GPU_UTILIZATION_SAMPLES, since_us, kind, count, buffer), "GetSamples")
        field = _VALUE_FIELDS.get(kind.value, "uiVal")
        return [(s.timeStamp, float(getattr(s.sampleValue, field))) for s in buffer[: count.value]]


def device_uuid() -> str:
    """The current CUDA device's UUID, as NVML names it."""
    import torch

    return str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)


def busy_during(run, uuid: str | None = None) -> Busy:
    """Run `run()` (a loop of calls on the GPU, lasting a second or more) and say how busy the GPU was meanwhile."""
    import time

    try:
        nvml = Nvml(uuid or device_uuid())
    except (OSError, AttributeError, RuntimeError) as e:
        run()
        return Busy(None, 0, f"NVML unavailable: {e}")
    start = int(time.time() * 1e6)
    run()
    end = int(time.time() * 1e6)
    time.sleep(0.2)  # NVML publishes a sample at the end of its period: let the last one inside the window land
    try:
        return share_within(nvml.utilization_samples(start), start, end)
    except OSError as e:
        return Busy(None, 0, str(e))
