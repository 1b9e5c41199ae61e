#!/usr/bin/env bash
# Second device call: the strided-input contiguity test alone (long traceback), then benchmarks/gate_cost.py before
# (b5caf8b: .before30) and after (this tree), one run each, softmax then rmsnorm.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
ROOT=$PWD
export PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/site:$ROOT/src:$ROOT
timeout 230 python3 -m pytest -p no:cacheprovider -v --tb=long --tier gpu tests/gpu/test_probe_gpu.py -k contiguity > "$OUT/contiguity.log" 2>&1
echo "contiguity rc=$?"; grep -E "passed|failed|Error|assert" "$OUT/contiguity.log" | tail -15
for only in softmax rmsnorm; do
  cd "$ROOT"; PYTHONPATH=/tmp/site:$ROOT/src:$ROOT timeout 110 python3 benchmarks/gate_cost.py --device cuda --repeat 1 --only $only --json "$OUT/cost_after_$only.json" > "$OUT/cost_after_$only.log" 2>&1; echo "after $only rc=$?"
  cd "$ROOT/.before30"; PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 110 python3 benchmarks/gate_cost.py --device cuda --repeat 1 --only $only --json "$OUT/cost_before_$only.json" > "$OUT/cost_before_$only.log" 2>&1; echo "before $only rc=$?"
done
cd "$ROOT"; tail -n 12 "$OUT"/cost_*.log
