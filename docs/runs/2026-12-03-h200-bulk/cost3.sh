python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
ROOT=$PWD; export PYTHONUNBUFFERED=1
cd $ROOT; PYTHONPATH=/tmp/site:$ROOT/src:$ROOT timeout 120 python3 benchmarks/gate_cost.py --device cuda --repeat 1 --only softmax --json $OUT/cost_after_softmax.json > $OUT/cost_after_softmax.log 2>&1; echo "after rc=$?"
cd $ROOT/.before30; PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 100 python3 benchmarks/gate_cost.py --device cuda --repeat 1 --only softmax --json $OUT/cost_before_softmax.json > $OUT/cost_before_softmax.log 2>&1; echo "before rc=$?"
cd $ROOT; grep -h "cuda warm\|^| cuda" $OUT/cost_after_softmax.log $OUT/cost_before_softmax.log
