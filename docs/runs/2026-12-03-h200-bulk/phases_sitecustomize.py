# Phase timings of a correctness check, judge and candidate, to stderr as "KLT pid name seconds".
import os, sys, time, functools
if os.environ.get("KL_PHASES"):
    def _wrap(obj, attr, label):
        f = getattr(obj, attr, None)
        if f is None or getattr(f, "_klt", False):
            return
        @functools.wraps(f)
        def g(*a, **k):
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                try:
                    with open(os.environ["KL_PHASES"], "a") as fh:
                        extra = ""
                        if label == "make_inputs":
                            import torch
                            extra = f" threads={torch.get_num_threads()}"
                        fh.write(f"KLT {os.getpid()} {label} {time.perf_counter()-t0:.4f}{extra}\n")
                except Exception:
                    pass
        g._klt = True
        setattr(obj, attr, g)
    import importlib
    def _m(name):
        try:
            return importlib.import_module(name)
        except Exception:
            return None
    wl, cor, c, w = (_m(n) for n in ("klineage.workload", "klineage.gates.correctness", "klineage.gates.candidate", "klineage.wire"))
    if wl: _wrap(wl, "make_case_inputs", "make_inputs"); _wrap(wl, "redraw", "redraw")
    if cor:
        for name in ("_reference", "_outputs_finding", "_mutation_finding", "_disagreement", "_runs_back", "_inputs_back", "_run_trial"):
            _wrap(cor, name, name)
    if c:
        _wrap(c.Candidate, "request", "request")
