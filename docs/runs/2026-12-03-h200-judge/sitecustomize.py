# Trace the judge's requests to its candidate (op, seconds) into $KL_TRACE; only where klineage's candidate exists.
import os, time
_path = os.environ.get("KL_TRACE")
if _path:
    try:
        import klineage.gates.candidate as c
        _req = c.Candidate.request
        def request(self, meta, tensors=None, body_limit=2**34):
            t0 = time.perf_counter()
            try:
                return _req(self, meta, tensors, body_limit)
            finally:
                with open(_path, "a") as f:
                    f.write(f"{os.getpid()} req {meta.get('op')}/{meta.get('task', meta.get('case', ''))} {time.perf_counter()-t0:.3f}\n")
        c.Candidate.request = request
        _start = c.start
        def start(spec):
            t0 = time.perf_counter()
            h = _start(spec)
            with open(_path, "a") as f:
                f.write(f"{os.getpid()} start {time.perf_counter()-t0:.3f}\n")
            return h
        c.start = start
        import klineage.gates.correctness as cor
        cor.start = start
    except Exception as e:  # the before tree has no candidate
        pass
