#!/usr/bin/env bash
# The issue-3/4 evaluation on an H200 machine, in stages that fit the device tool's 10-minute calls. Each stage
# reads the state the previous one left (lineages, library, memory base) from .state/ (git-excluded, carried by the
# device tool) and writes its results and the new state under $OUT.
#
#   bash benchmarks/h200_eval.sh mine        # the five experts, mined and probed on the GPU (effects measured)
#   bash benchmarks/h200_eval.sh memory      # the memory baseline's base: blind runs on the experts' simplest forms
#   bash benchmarks/h200_eval.sh bench SUITE METHODS BUDGET [SHARDS]   # SHARDS GPUs in parallel, then merged
#
# Before each device call, here: `git rev-parse --short HEAD > .state/COMMIT` (the tree travels without its history;
# reports are stamped with that commit). Environment: budget-independent knobs go through KLINEAGE_* (seeds drawn on the tiny case; the bench case is still
# checked once per candidate; final programs are re-checked with hidden seeds and probe cases).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/klineage-out}"
mkdir -p "$OUT" .state
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export KLINEAGE_HOME="$PWD/.state/home" KLINEAGE_SEED_CASE=tiny PYTHONUNBUFFERED=1
KLINEAGE_COMMIT="$(cat .state/COMMIT 2>/dev/null || echo unknown)"
export KLINEAGE_COMMIT
[ -f .state/home.tgz ] && tar -xzf .state/home.tgz -C .state
KL="python3 -m klineage"
DEVICE="${DEVICE:-cuda}"  # DEVICE=cpu: a dry run of the same stages without a GPU
E=src/klineage/examples

save_state() {  # what the next stage needs, small enough to come back through $OUT
    tar -czf "$OUT/home.tgz" -C .state --exclude='home/cache.sqlite' home
}

case "${1:-}" in
mine)
    python3 benchmarks/mine_all.py --device "$DEVICE" --home "$KLINEAGE_HOME" --json "$OUT/mine.json" \
        --pair "$E/matmul/workload.py:$E/matmul/expert.py" \
        --pair "$E/attention/workload.py:$E/attention/expert.py" \
        --pair "$E/rmsnorm/workload.py:$E/rmsnorm/liger.py:liger_kernel.ops.rms_norm" \
        --pair "$E/cross_entropy/workload.py:$E/cross_entropy/liger.py:liger_kernel.ops.cross_entropy" \
        --pair "$E/swiglu/workload.py:$E/swiglu/liger.py:liger_kernel.ops.swiglu" 2>&1 | tee "$OUT/mine.log"
    save_state
    ;;
memory)
    $KL memory build --suite experts --budget "${2:-8}" --device "$DEVICE" 2>&1 | tee "$OUT/memory.log"
    save_state
    ;;
bench)
    suite="$2" methods="$3" budget="$4" shards="${5:-1}"
    pids=()
    mkdir -p /tmp/shards .state/home
    for i in $(seq 1 "$shards"); do
        home=".state/shard$i"
        rm -rf "$home" && cp -r .state/home "$home"
        CUDA_VISIBLE_DEVICES=$((i - 1)) KLINEAGE_HOME="$PWD/$home" $KL bench "$suite" --methods "$methods" \
            --budget "$budget" --shard "$i/$shards" --device "$DEVICE" --out "/tmp/shards/shard$i" \
            > "/tmp/shards/shard$i.log" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || echo "a shard failed (see its log)"; done
    $KL bench-merge /tmp/shards/shard*/ --out "$OUT/report" || true
    tar -czf "$OUT/shards.tgz" -C /tmp shards  # at most 8 files come back: the shards travel as one
    ;;
*)
    echo "usage: $0 mine | memory [BUDGET] | bench SUITE METHODS BUDGET [SHARDS]" >&2
    exit 2
    ;;
esac
