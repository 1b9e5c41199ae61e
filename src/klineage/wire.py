"""Tensors between the judge and the candidate process, as bytes no one executes.

A frame is an 8-byte little-endian header length, a JSON header `{"tensors": {name: {dtype, shape, offsets}},
"meta": {...}}`, then the raw bytes of every tensor, contiguous, in little-endian order (safetensors' layout). The
reader caps the header and the body before it parses anything, and builds tensors only where the judge asks for a
name with the dtype and shape it expects: what the candidate claims about a tensor (its strides, its device, its
type) proves nothing, so nothing of it is kept. Nothing read here is unpickled, imported or executed: `json.loads`
and `torch.frombuffer` are the only parsers.

Both sides use the same code: the judge's requests (inputs, a case's init inputs) are frames too.

A frame's body travels one of two ways. Through the pipe, after the header (the format above). Or, where the two
processes share a `Bulk` region for that direction (a sealed memfd, gates.candidate), in that region from its first
byte, each tensor at a 64-byte boundary, the header alone in the pipe saying `"bulk": true`: a bench-sized check sends
about 1 GiB per trial each way (softmax 8192 x 8192 fp32: the inputs, two runs' outputs, the inputs back), which
through a pipe cost 1.4-2.0 s a trial on the H200 (docs/BENCHMARKS.md section 3). The reader reads the body in place
and copies each tensor it asks for out of it once (to its device), so what the writer changes after the header was
sent never reaches a tensor the reader already built, and nothing the region holds is trusted beyond its bytes."""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

# what one frame may hold at most unless the reader says otherwise: a header of evidence (launch rows, functions run)
# is kilobytes; a body is the outputs of one call, which the judge bounds by what it expects
HEADER_LIMIT = 4 * 2**20
BODY_LIMIT = 2**34

DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
)


# where each tensor of a bulk body starts: aligned for any dtype's element and for the host copy
BULK_ALIGN = 64


class WireError(ValueError):
    """A frame that is cut, too large or malformed; the reader turns it into a failing verdict."""


@dataclass(frozen=True)
class Frame:
    """A parsed frame: each tensor's dtype name, shape and byte range in `body`, and the JSON `meta`."""

    tensors: dict = field(default_factory=dict)  # name -> (dtype, shape tuple, (start, stop))
    meta: dict = field(default_factory=dict)
    body: bytearray | memoryview = field(default_factory=bytearray, repr=False)  # a view of a Bulk region, or own


class Bulk:
    """One direction's shared region: a memfd both processes hold, made by the judge before the fork. Sealed
    against shrinking (and against any further seal), so a mapping of it can never fault in the reader when the
    other side truncates it; it only grows. The writer grows it through `grow` (the judge: its own ftruncate; the
    candidate: a request its judge answers, bounded by what the judge asked for, since the candidate's file-size
    limit would refuse a write past 1 GiB). The region holds one frame's body at a time: a writer writes the next
    frame only after the reader answered the last (the protocol is one request, one answer)."""

    def __init__(self, fd: int, grow: Callable[[int], None] | None = None) -> None:
        self.fd = fd
        self.grow = grow or self._truncate
        self._map: mmap.mmap | None = None

    @classmethod
    def create(cls, name: str) -> Bulk:
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        return cls(fd)

    def _truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def ensure(self, size: int) -> None:
        """Grow the region to hold `size` bytes (rounded up to 2 MiB: a run of growing frames grows it rarely)."""
        if self.size() < size:
            self.grow(-(-size // BULK_GROWTH) * BULK_GROWTH)
            if self.size() < size:
                raise WireError(f"the shared region was not grown to {size} bytes")

    def view(self, size: int) -> memoryview:
        """The region's first `size` bytes, mapped (again, where the file grew past the mapping). A view that
        outlives a remap keeps the old mapping alive until it is dropped."""
        if size > self.size():
            raise WireError(f"a body of {size} bytes, but the shared region holds {self.size()}")
        if self._map is None or len(self._map) < size:
            self._map = mmap.mmap(self.fd, self.size())
        return memoryview(self._map)[:size]

    def close(self) -> None:
        self._map = None  # unmapped once no tensor views it
        try:
            os.close(self.fd)
        except OSError:
            pass


BULK_GROWTH = 2 * 2**20


def dtype_of(name: str):
    import torch

    if name not in DTYPES:
        raise WireError(f"dtype {name!r} is not one the wire carries")
    return getattr(torch, name)


def _raw(tensor) -> memoryview:
    """The tensor's bytes in row-major order, on the host: whatever its layout, the frame holds values only."""
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")


def encode(tensors: dict, meta: dict) -> list:
    """The frame for `tensors` (name -> plain tensor, any device, any layout) and a JSON-able `meta`, as a list of
    byte buffers to write in order (no copy of a large body into one bytes object)."""
    specs, _ = _layout(tensors, 1)
    return _header({"tensors": specs, "meta": meta}) + [_raw(tensor) for tensor in tensors.values()]


def _layout(tensors: dict, align: int) -> tuple[dict, int]:
    """Each tensor's header entry (dtype, shape, byte offsets in the body, each start at the next multiple of
    `align`) and the body's length."""
    import torch

    specs, offset = {}, 0
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} is not a tensor")
        start = -(-offset // align) * align
        offset = start + tensor.numel() * tensor.element_size()
        dtype = str(tensor.dtype).removeprefix("torch.")
        specs[name] = {"dtype": dtype, "shape": list(tensor.shape), "offsets": [start, offset]}
    return specs, offset


def _header(header: dict) -> list:
    raw = json.dumps(header, allow_nan=True).encode()
    return [struct.pack("<Q", len(raw)), raw]


def write_frame(fd: int, tensors: dict, meta: dict, bulk: Bulk | None = None) -> None:
    """Write a frame to `fd`; its body into `bulk` where given (and not empty), the header alone to `fd`."""
    pieces = encode_bulk(tensors, meta, bulk) if bulk is not None and tensors else encode(tensors, meta)
    for piece in pieces:
        view = memoryview(piece).cast("B")
        while view:
            written = os.write(fd, view)
            view = view[written:]


def encode_bulk(tensors: dict, meta: dict, bulk: Bulk) -> list:
    """Copy each tensor's values into `bulk` (one copy: a device tensor goes straight from the device into the
    region) and return the header to send."""
    import torch

    specs, offset = _layout(tensors, BULK_ALIGN)
    if offset:
        bulk.ensure(offset)
        region = bulk.view(offset)
        for name, tensor in tensors.items():
            start, stop = specs[name]["offsets"]
            if stop > start:
                dst = torch.frombuffer(region, dtype=torch.uint8, count=stop - start, offset=start)
                dst.view(tensor.dtype).view(tensor.shape).copy_(tensor.detach())
        del region
    return _header({"tensors": specs, "meta": meta, "bulk": True})


def _read_exact(fd: int, size: int) -> bytearray:
    out = bytearray(size)
    view = memoryview(out)
    got = 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise WireError(f"frame cut after {got} of {size} bytes")
        got += n
    return out


def read_frame(
    fd: int, header_limit: int = HEADER_LIMIT, body_limit: int = BODY_LIMIT, bulk: Bulk | None = None
) -> Frame:
    """One frame from `fd`, its sizes checked against the limits before anything is parsed; a body the header says
    is in the shared region is read there (`bulk`; a frame that says so where none is shared is malformed). Raises
    WireError on a cut, oversized or malformed frame (EOFError at a clean end: the other side closed its end)."""
    first = os.read(fd, 8)
    if not first:
        raise EOFError("the other side closed the pipe")
    if len(first) < 8:
        first = bytes(first) + bytes(_read_exact(fd, 8 - len(first)))
    (size,) = struct.unpack("<Q", first)
    if size > header_limit:
        raise WireError(f"header of {size} bytes, over the limit of {header_limit}")
    header = _parse_header(bytes(_read_exact(fd, size)))
    in_bulk = header.get("bulk", False)
    if in_bulk is not False and (in_bulk is not True or bulk is None):
        raise WireError("the header says the body is in a shared region where none is shared")
    specs = _specs(header.get("tensors"), body_limit, BULK_ALIGN if in_bulk else 1)
    length = max((stop for _, _, (_, stop) in specs.values()), default=0)
    if in_bulk:
        return Frame(specs, header["meta"], bulk.view(length) if length else bytearray())
    return Frame(specs, header["meta"], _read_exact(fd, length) if length else bytearray())


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise WireError(f"header is not JSON: {str(e)[:200]}") from None
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
        raise WireError("header is not an object with a meta object")
    return header


def _specs(raw, body_limit: int, align: int = 1) -> dict:
    """Validated tensor entries: known dtype, non-negative integer shape, offsets that tile the body in order (each
    start at the next multiple of `align`) with exactly the bytes the dtype and shape need."""
    import torch

    if not isinstance(raw, dict):
        raise WireError("header has no tensors object")
    specs, expected_start = {}, 0
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise WireError(f"tensor {name!r}: entry is not an object")
        dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("offsets")
        if not isinstance(dtype, str):
            _bad(name, "dtype")
        if not isinstance(shape, list) or not all(type(n) is int and 0 <= n < 2**48 for n in shape):
            _bad(name, "shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)):
            _bad(name, "offsets")
        numel = 1
        for n in shape:
            numel *= n
        nbytes = numel * torch.empty((), dtype=dtype_of(dtype)).element_size()
        start, stop = offsets
        if start != -(-expected_start // align) * align or stop - start != nbytes or stop > body_limit:
            raise WireError(f"tensor {name!r}: bytes [{start}, {stop}) do not hold {shape} {dtype} in order")
        specs[name] = (dtype, tuple(shape), (start, stop))
        expected_start = stop
    return specs


def _bad(name: str, what: str):
    raise WireError(f"tensor {name!r}: malformed {what}")


def tensor(frame: Frame, name: str, dtype: str | None = None, shape: tuple | None = None, device: str = "cpu"):
    """The tensor `name` of `frame`, built from its bytes as a fresh contiguous tensor on `device` (one copy out
    of the frame's body, which may be a region the other side can still write), after checking that it is there
    and, where given, has the dtype and shape the judge expects. WireError otherwise."""
    import torch

    if name not in frame.tensors:
        raise WireError(f"no tensor {name!r} in the frame")
    got_dtype, got_shape, (start, stop) = frame.tensors[name]
    if dtype is not None and got_dtype != dtype:
        raise WireError(f"tensor {name!r} is {got_dtype}, expected {dtype}")
    if shape is not None and got_shape != tuple(shape):
        raise WireError(f"tensor {name!r} has shape {got_shape}, expected {tuple(shape)}")
    torch_dtype = dtype_of(got_dtype)
    if stop == start:
        return torch.empty(got_shape, dtype=torch_dtype, device=device)
    raw = torch.frombuffer(frame.body, dtype=torch.uint8, count=stop - start, offset=start)
    out = torch.empty(got_shape, dtype=torch_dtype, device=device)
    out.reshape(-1).view(torch.uint8).copy_(raw)
    return out


# --- values: inputs and outputs as JSON with tensors by name ------------------------------------------------------


def pack_values(values: list, prefix: str) -> tuple[dict, list]:
    """(tensors by name, a JSON description) of a list of inputs or outputs: each tensor as `{"tensor": name}`,
    each JSON-able scalar (None, bool, int, float, str, lists of them) as `{"value": v}`, anything else as
    `{"type": its type name}` (the judge fails an output that is not a tensor; a workload input must be one of
    these)."""
    import torch

    tensors, described = {}, []
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            name = f"{prefix}{i}"
            tensors[name] = value
            described.append({"tensor": name, "stride": list(value.stride())})
        elif _jsonable(value):
            described.append({"value": value, "tuple": True} if isinstance(value, tuple) else {"value": value})
        else:
            described.append({"type": type(value).__name__})
    return tensors, described


def _jsonable(value, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)) and depth < 4:
        return all(_jsonable(v, depth + 1) for v in value)
    return False


def unpack_inputs(frame: Frame, described: list, device: str = "cpu") -> list:
    """The candidate's side of pack_values for the judge's own inputs (trusted): tensors by name on `device`, in the
    layout the judge made them in (a workload's strided input stays strided), scalars as sent."""
    import torch

    out = []
    for item in described:
        if "tensor" in item:
            value = tensor(frame, item["tensor"], device=device)
            stride = tuple(item.get("stride") or value.stride())
            if stride != value.stride() and value.numel() > 1:
                value = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=device).copy_(value)
            out.append(value)
        elif item.get("tuple"):
            out.append(tuple(item.get("value")))
        else:
            out.append(item.get("value"))
    return out
