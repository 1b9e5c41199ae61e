"""KLineage: learn when GPU-kernel optimizations are safe and worth applying, from expert Triton kernels, and apply
them under compile / correctness / profile gates.

Pipeline order of the modules (each imports only from those above it): config, workload, program, compare, interp,
guards, sass, sandbox, timing, gates, cache, check, audit, cli."""

from klineage.config import __version__

__all__ = ["__version__"]
