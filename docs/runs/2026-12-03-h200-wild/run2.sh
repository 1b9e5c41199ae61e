python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 GEMS_VENDOR=nvidia KLINEAGE_SEED_CASE=tiny KLINEAGE_COMMIT=$(cat .state/COMMIT)
(timeout 170 python3 -m pytest -p no:cacheprovider -v --tb=short --tier gpu tests/gpu/test_gates_gpu.py -k "cached_compiled or stray_store_far" > $OUT/gpu-tests.log 2>&1; echo "tests rc=$?" >> $OUT/gpu-tests.log) &
KLINEAGE_HOME=/tmp/h timeout 175 python3 -m klineage bench wild --methods blind --budget 1 --device cuda --instances gems_softmax,gems_sum_dim,gems_rms_norm,gems_layer_norm --out $OUT/wild > $OUT/wild.log 2>&1; echo "bench rc=$?"
wait
grep -E "PASSED|FAILED|SKIPPED|rc=|Error" $OUT/gpu-tests.log | tail -8
grep -A12 "Suite run" $OUT/wild/bench.md | head -14; grep -B2 -A8 "^Skipped" $OUT/wild/bench.md | head -12
