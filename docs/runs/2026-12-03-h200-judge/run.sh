#!/usr/bin/env bash
# One device call: issue 30's GPU side on the int30 tree (.int30), then gate cost before (.before30) and after.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
ROOT=$PWD
S=()
step() {  # step NAME LIMIT_S CMD...: run in .int30 unless told, log to $OUT/NAME.log, keep a summary row
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    (set -o pipefail; timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log" | grep -E "passed|failed|PASSED|FAILED|ERROR|XPASS|xfail|^\|" | tail -40)
    local rc=$?
    S+=("$name rc=$rc $((SECONDS - t0))s")
}
export PYTHONUNBUFFERED=1
cd "$ROOT/.int30"
export PYTHONPATH=/tmp/site:$PWD/src:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
step holes 180 python3 -m pytest -p no:cacheprovider -v --tb=short --tier gpu tests/gpu/test_gates_gpu.py -k "huge_alloc or call_counter or patch_elapsed or tiny_hardcoded or observed_by or clock or judges or timed_outputs or device_memory or control_passes"
step contiguity 90 python3 -m pytest -p no:cacheprovider -v --tb=long --tier gpu tests/gpu/test_probe_gpu.py -k contiguity
step isolation 90 python3 -m pytest -p no:cacheprovider -v --tb=short --tier gpu tests/gpu/test_isolation_gpu.py
step cost_after 100 python3 benchmarks/gate_cost.py --device cuda --repeat 1 --only softmax --json $OUT/cost_after.json
cd "$ROOT/.before30"
export PYTHONPATH=/tmp/site:$PWD/src:$PWD
step cost_before 100 python3 benchmarks/gate_cost.py --device cuda --repeat 1 --only softmax --json $OUT/cost_before.json
cd "$ROOT/.int30"
export PYTHONPATH=/tmp/site:$PWD/src:$PWD
printf '%s\n' "${S[@]}"
