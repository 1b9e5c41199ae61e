export PYTHONUNBUFFERED=1
ROOT=$PWD
cd $ROOT/.before30 && KL_PHASES=$OUT/before.txt PYTHONPATH=$ROOT/.gpu/hook2:/tmp/site:$PWD/src:$PWD timeout 120 python3 $ROOT/.gpu/phases.py before > $OUT/before.log 2>&1
cd $ROOT && KL_PHASES=$OUT/after.txt PYTHONPATH=$ROOT/.gpu/hook2:/tmp/site:$PWD/src:$PWD timeout 120 python3 $ROOT/.gpu/phases.py after > $OUT/after.log 2>&1
cd $ROOT; grep -h correctness $OUT/before.log $OUT/after.log
for f in before after; do echo "== $f"; awk '/KLT --- check 0/{f=1;next} /KLT --- check 1/{f=0} f' $OUT/$f.txt | awk '{k=$3; s[k]+=$4; n[k]++} END {for (k in s) printf "%-22s n=%3d %8.3f\n", k, n[k], s[k]}' | sort; grep -m2 threads $OUT/$f.txt; done
