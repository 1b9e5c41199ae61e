#!/usr/bin/env bash
# One device call: the correctness gate's cost with bodies through shared regions (wire.Bulk), before (b5caf8b, the
# judge in the candidate's process: .before30) against this tree, side by side; prof.py from the judge run.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
ROOT=$PWD
PROF=$ROOT/docs/runs/2026-12-03-h200-judge/prof.py
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
for round in 1 2; do
  cd "$ROOT/.before30"; PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 170 python3 "$PROF" before 2>&1 | tee -a "$OUT/prof-before.log" | grep -v Warn
  cd "$ROOT"; PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 170 python3 "$PROF" after 2>&1 | tee -a "$OUT/prof-after.log" | grep -v Warn
done
