"""What a sandboxed job costs on a GPU before it does its own work, and what the warm server's preloads save.

    python benchmarks/sandbox_costs.py profile [--instance layernorm] [--out DIR]
    python benchmarks/sandbox_costs.py preload [--instance layernorm] [--shards 12] [--seconds 60]

`profile`: in one warm sandbox, a correctness check and a pair timing of a held-out naive program, each twice, each
under cProfile inside its forked child; the profiles (cumulative and own time) go to DIR, one line per job here.
`preload`: bench shards' attempts (a correctness check, then a pair timing: benchmarks/gpu_turns.py's loop) on SHARDS
threads for SECONDS, with the warm server's old preload list (torch, triton, klineage.gates) and with today's
(klineage.sandbox.PRELOAD), twice each, alternating; then four checks alone with today's.

A report, not a test; it needs a GPU. Both set the bench's input cache (KLINEAGE_INPUT_CACHE), so drawing bench-sized
inputs on the CPU is not what is measured. On the H200: RESULTS.md#run-18 (logs:
docs/runs/2026-12-01-h200/session13/)."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

OLD_PRELOAD = ("torch", "triton", "klineage.gates")  # the warm server's list before 45d68c4 (RESULTS.md#run-18)


def profiled_job(payload: tuple[str, object]) -> str:
    """Runs in a sandbox child: one gate job of klineage.gates' modules under cProfile; its two tables as text."""
    import cProfile
    import io
    import pstats

    from klineage.gates import correctness
    from klineage.gates import profile as profile_gate

    name, arg = payload
    job = {"correctness_job": correctness.correctness_job, "profile_pair_job": profile_gate.profile_pair_job}[name]
    profile = cProfile.Profile()
    began = time.perf_counter()
    profile.enable()
    job(arg)
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(25)
    return f"{name}: {time.perf_counter() - began:.2f} s\n{text.getvalue()}"


def profile(instance: str, out: Path) -> None:
    from gpu_turns import held_out_request

    from klineage.sandbox import GpuTurns, Job, Sandbox

    request, program = held_out_request(instance)
    on_gpu = {"timeout_s": 300, "device": "cuda", "turns": GpuTurns.of(request.settings)}
    out.mkdir(parents=True, exist_ok=True)
    jobs = [("correctness_job", request)] * 2 + [("profile_pair_job", (request, program))] * 2
    with Sandbox(warm=True) as sb:
        for i, payload in enumerate(jobs):
            result = sb.run(Job(f"{Path(__file__).stem}:profiled_job", payload, **on_gpu))
            text = result.value if result.ok else f"{result.error}\n{result.log}"
            (out / f"child-{instance}-{i}-{payload[0]}.txt").write_text(text)
            print(
                f"{instance} job {i}: {text.splitlines()[0] if text else '?'}; job wall {result.seconds:.2f} s",
                flush=True,
            )


def preload(instance: str, shards: int, seconds: float) -> None:
    import gpu_turns

    import klineage.sandbox as sandbox
    from klineage.gates import run_gate

    request, program = gpu_turns.held_out_request(instance)
    arms = []
    for label, names in (("old preload", OLD_PRELOAD), ("preload now", sandbox.PRELOAD)) * 2:
        sandbox.Sandbox.__init__.__defaults__ = (True, names)  # what gpu_turns' shards construct
        arm = gpu_turns.run_arm("yield", request, program, shards, seconds)
        arms.append({**arm, "turns": label})
    sandbox.Sandbox.__init__.__defaults__ = (True, sandbox.PRELOAD)
    gpu_turns._report(arms, None)
    with sandbox.Sandbox(warm=True) as sb:
        for _ in range(4):
            began = time.perf_counter()
            verdict = run_gate("correctness", request, sb)
            print(f"alone, preload now: check {verdict.status} in {time.perf_counter() - began:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("profile", "preload"))
    parser.add_argument("--instance", default="layernorm")
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", tempfile.gettempdir())))
    args = parser.parse_args()
    import torch
    import triton

    if not torch.cuda.is_available():
        print("no GPU: nothing is measured (this report needs one)")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_turns, and this module for the sandbox child
    from gpu_turns import shard_env

    shard_env()
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")])
    )
    print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
    print(
        f"device: {torch.cuda.get_device_name()}, {os.cpu_count()} host cores; torch {torch.__version__}, "
        f"triton {triton.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    if args.mode == "profile":
        profile(args.instance, args.out)
    else:
        preload(args.instance, args.shards, args.seconds)


if __name__ == "__main__":
    main()
