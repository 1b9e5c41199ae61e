"""Static checks without a GPU: a kernel written to a file, imported, and compiled for sm_90 by Triton's bundled
compiler, as the compile gate compiles it."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def load_module(source: str, folder: Path, name: str):
    """`source` written to `folder/name.py` and imported (a Triton kernel needs its source in a file)."""
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_sm90(fn, signature: dict, constexprs: dict, num_warps: int):
    """`fn` compiled for sm_90 (every parameter typed in `signature`, constexprs by name)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
