python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD KLINEAGE_SEED_CASE=tiny PYTHONUNBUFFERED=1 KLINEAGE_GPU_LOCK=/tmp/g.lock KLINEAGE_COMMIT=$(cat .state/COMMIT)
E=src/klineage/examples
(timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_probe_gpu.py -k walk_made_on_the_cpu >$OUT/gpu-test.log 2>&1; echo "gpu test rc $?" >>$OUT/summary.txt) &
for p in swiglu:$E/swiglu/workload.py:$E/swiglu/liger.py:liger_kernel.ops.swiglu softmax:$E/softmax/workload.py:$E/softmax/expert.py; do
  n=${p%%:*}; cp -r .state/cpu/home-$n /tmp/home-$n
  (s=$(date +%s); timeout 200 python3 benchmarks/mine_all.py --device cuda --walk-device cpu --home /tmp/home-$n --json $OUT/mine-$n.json --pair ${p#*:} >$OUT/mine-$n.log 2>&1; echo "$n rc $? $(($(date +%s)-s)) s" >>$OUT/summary.txt) &
done
wait
for n in swiglu softmax; do python3 - /tmp/home-$n $n <<'P'
import glob, json, sys
h, n = sys.argv[1], sys.argv[2]
sk = [json.load(open(f)) for f in glob.glob(h + "/library/skills/*.json")]
opt = [s for s in sk if s["kind"] == "optimization"]
gpu = [s for s in opt if any(v.get("measured") for v in s["effect"].values())]
conds = [c for s in opt for c in s["conditions"]]
reused = sum("where the walk ran" in c["evidence"] for c in conds)
print(f"{n}: {len(opt)} optimization skills, {len(gpu)} with GPU effects; conditions {len(conds)}: {reused} taken from the CPU walk, {len(conds)-reused} probed on the GPU; statuses", {k: sum(c['status'] == k for c in conds) for k in sorted({c['status'] for c in conds})})
P
done
cat $OUT/summary.txt; tail -3 $OUT/gpu-test.log
