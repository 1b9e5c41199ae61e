#!/usr/bin/env bash
# The issue-3/4 evaluation on a two-GPU H200 machine (device kind nvidia-h200-x2), as one background pipeline that
# outlives the device tool's 10-minute calls: the machine stays warm while calls follow each other closely, and every
# call brings back what has finished so far.
#
#   bash benchmarks/h200_eval.sh start MINUTES BUDGET POLL_S   # copy the tree to $RUN, launch the pipeline, poll
#   bash benchmarks/h200_eval.sh poll POLL_S                   # wait up to POLL_S (at most 540), pack into $OUT
#   bash benchmarks/h200_eval.sh walks DIR [JOBS]              # here, without a GPU: the experts' walks for PRIOR=DIR
#   EFFECTS=FILE bash benchmarks/h200_eval.sh walks DIR         # the same, then FILE's effects (`klineage effects
#                                                              # export`) imported: PRIOR=DIR MINE= needs no GPU mining
#
# The pipeline, all of it stopped at MINUTES after the start (what finished is kept):
#   A. each expert in $MINE mined and probed on cuda in its own process and data directory (matmul, RMSNorm, SwiGLU
#      on GPU 0; attention, cross-entropy, softmax on GPU 1; effects timed), resumed from $PRIOR's data directories where
#      given (an earlier run's results, carried in .state), and the planted/probed/hinted fixtures on GPU 0
#      (FIXTURES=1, not waited for); mining stops at A_MINUTES;
#   B. the data directories merged into one library; with MEMORY=1 the memory baseline's base built from the merged
#      lineages' simplest forms (5 parallel shards, blind runs of MEMORY_BUDGET, MEMORY_MINUTES at most; with
#      WALK_DEVICE=cpu it is built from the walks instead, beside A, MEMORY_MINUTES from the start) and added to
#      PRIOR's base; then
#      SHARDS bench shards (spread over the GPUs) run METHODS on SUITES (INSTANCES of them, where given) under BUDGET,
#      each taking the next instance no other shard has taken (`bench --queue`; longest first by PRIOR's bench, where
#      INSTANCES is not given) and rewriting its report after every instance; the GPU tests beside them
#      (GPU_TESTS=1: tests/gpu; or a test path). WAIT_MINING=0 starts B at once, with the lineages as they were.
# PROFILE=0 skips the timer-vs-do_bench check; RESUME=0 starts the bench afresh (PRIOR's lineages and memory base
# still used). Jobs sharing a GPU take turns through KLINEAGE_GPU_LOCK (klineage.sandbox.gpu_turn): checks run side by side, a
# job that times runs alone on its GPU.
# Before the call, here: `git rev-parse --short HEAD > .state/COMMIT` (the tree travels without its history).
# The device call carries .whl (libcst, liger-kernel wheels) and .state. DEVICE=cpu makes a dry run without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/klineage-out}"
RUN="${RUN:-/tmp/klrun}"          # the tree the pipeline runs from (the call's own tree is replaced at every call)
R="${RESULTS:-/tmp/klres}"        # results, kept on the machine between calls
DEVICE="${DEVICE:-cuda}"
A_MINUTES="${A_MINUTES:-11}"
SHARDS="${SHARDS:-8}"
METHODS="${METHODS:-klineage,blind,memory,autotune}"
SUITES="${SUITES:-naive,experts,heldout}"
INSTANCES="${INSTANCES:-}"        # comma-separated instance names of SUITES (empty: all of them)
GPUS="${GPUS:-2}"
EXPERTS="matmul attention rmsnorm cross_entropy swiglu softmax"
MINE="${MINE-$EXPERTS}"           # which experts to mine (resumed from $PRIOR's data directories where given)
PRIOR="${PRIOR:-}"                # an earlier run's results folder (.state/runN), carried
WAIT_MINING="${WAIT_MINING:-1}"   # 0: the bench starts at once, with the lineages as they were at the start
FIXTURES="${FIXTURES:-1}"         # mine the planted/probed/hinted fixtures too
MEMORY="${MEMORY:-1}"             # build the memory baseline's base (5 parallel shards) before the bench
MEMORY_BUDGET="${MEMORY_BUDGET:-6}"
MEMORY_MINUTES="${MEMORY_MINUTES:-4}"
GPU_TESTS="${GPU_TESTS:-1}"      # 1: tests/gpu beside the bench; 0: none; a path: those tests only
GPU_TESTS_K="${GPU_TESTS_K:-}"    # a pytest -k expression for them (GPU_TESTS is split into words: no -k there)
RETIME="${RETIME:-0}"             # 1: time the recorded steps again (walks resumed from $PRIOR under contention)
WALK_DEVICE="${WALK_DEVICE:-}"    # cpu: $PRIOR's walks were made without a GPU (mine_all.py --device cpu); take
                                  # them as recorded, time their steps and probe on the GPU (no GPU walk)
RESUME="${RESUME:-1}"             # 0: the bench starts afresh (PRIOR's lineages and memory base are still used)
mkdir -p "$OUT"

env_setup() {
    if [ -d .whl ] && [ ! -f /tmp/site/.done ] && ! python3 -c "import libcst, liger_kernel" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl && touch /tmp/site/.done
    fi
    export PYTHONPATH="/tmp/site:$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    export KLINEAGE_SEED_CASE=tiny PYTHONUNBUFFERED=1 KLINEAGE_INPUT_CACHE=/dev/shm/klineage-inputs
    export KLINEAGE_PROGRESS_LINES=1  # the logs say which instance, method and evaluation each process is at
    # The device image sets PYTHONDONTWRITEBYTECODE and its torch ships no bytecode, so every process compiled torch's
    # sources again: `import torch, triton, torch._dynamo` took 10.1 s there, 3.8 s once a first process had written
    # bytecode under a prefix of our own (session 13; the image's site-packages stay untouched). Every shard,
    # warm server, mining process and cold job starts faster.
    unset PYTHONDONTWRITEBYTECODE
    export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-/tmp/klineage-pycache}"
    KLINEAGE_COMMIT="$(cat .state/COMMIT 2>/dev/null || echo unknown)"
    export KLINEAGE_COMMIT
}

expert_pair() {  # expert_pair NAME: the GPU it is mined on and its mine_all.py --pair
    local E=src/klineage/examples
    case "$1" in
    matmul) echo "0 $E/matmul/workload.py:$E/matmul/expert.py" ;;
    attention) echo "1 $E/attention/workload.py:$E/attention/expert.py" ;;
    rmsnorm) echo "0 $E/rmsnorm/workload.py:$E/rmsnorm/liger.py:liger_kernel.ops.rms_norm" ;;
    cross_entropy) echo "1 $E/cross_entropy/workload.py:$E/cross_entropy/liger.py:liger_kernel.ops.cross_entropy" ;;
    swiglu) echo "0 $E/swiglu/workload.py:$E/swiglu/liger.py:liger_kernel.ops.swiglu" ;;
    softmax) echo "1 $E/softmax/workload.py:$E/softmax/expert.py" ;;
    esac
}

walks() {  # walks DIR [JOBS]: the six experts walked and probed on this machine's CPU, JOBS at a time (default 2),
    # each into DIR/home-NAME: the PRIOR of a WALK_DEVICE=cpu device run (run 15: 11.5 minutes on 2 cores)
    local dir=$1 jobs=${2:-2} name gpu pair
    mkdir -p "$dir"
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
    for name in $EXPERTS; do
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 2; done
        read -r gpu pair <<<"$(expert_pair "$name")"
        (python3 benchmarks/mine_all.py --device cpu --home "$dir/home-$name" --json "$dir/mine-$name.json" \
            --pair "$pair" >"$dir/mine-$name.log" 2>&1
            echo "$(date -u +%H:%M:%S) walked $name: rc $?" | tee -a "$dir/stages.txt"
            if [ -n "${EFFECTS:-}" ]; then  # a GPU's effects for the same steps: the bench needs no mining stage
                python3 -m klineage effects import "$EFFECTS" --home "$dir/home-$name" >>"$dir/mine-$name.log" 2>&1
                echo "$(date -u +%H:%M:%S) effects from $EFFECTS into $name: rc $?" | tee -a "$dir/stages.txt"
            fi) &
    done
    wait
}

memory_build() {  # memory_build HOME END: the memory baseline's base, blind runs on HOME's experts' simplest forms
    # (5 parallel shards) until END, joined into $R/memory.json with PRIOR's base: a knowledge base of earlier runs
    # grows from run to run (run 17 remembered 2 outcomes in its 3 minutes, run 19 9 in 5, each on its own)
    local home=$1 end=$2 i mem=()
    stage "memory base from the lineages in $home"
    for i in $(seq 1 5); do
        (KLINEAGE_HOME="$home" on_gpu $((i - 1)) timeout "$(left_s "$end")" python3 -m klineage memory build \
            --suite experts --budget "$MEMORY_BUDGET" --shard "$i/5" --device "$DEVICE" \
            --out "$R/memory$i.json" >"$R/memory$i.log" 2>&1
            stage "memory shard $i: rc $?") &
        mem+=($!)
    done
    for pid in "${mem[@]}"; do wait "$pid"; done
    python3 - "$R/memory.json" "$R/memory-prior.json" "$R"/memory?.json <<'EOF2'
import json, sys
from pathlib import Path
out, found = Path(sys.argv[1]), []
for p in map(Path, sys.argv[2:]):  # PRIOR's base first; an outcome already there (a file copied twice) once
    for e in json.loads(p.read_text()) if p.is_file() else []:
        if e not in found:
            found.append(e)
out.write_text(json.dumps(found, indent=1))
EOF2
    stage "memory base: $(python3 -c "import json; print(len(json.load(open('$R/memory.json'))))" 2>/dev/null) outcomes \
($(python3 -c "import json; print(len(json.load(open('$R/memory-prior.json'))))" 2>/dev/null || echo 0) from PRIOR)"
}

left_s() { local s=$(($1 - $(date +%s))); echo $((s > 1 ? s : 1)); }  # seconds left to a deadline, at least 1

stage() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$R/stages.txt"; }

on_gpu() {  # on_gpu I: run the rest of the line on GPU I, taking turns at the clock with its other jobs
    local gpu=$(($1 % GPUS))
    shift
    CUDA_VISIBLE_DEVICES=$gpu KLINEAGE_GPU_LOCK="/tmp/klineage-gpu$gpu.lock" "$@"
}

merge_homes() {  # merge_homes DEST: the experts' data directories (and the memory base) as one
    local dest=$1 name
    rm -rf "$dest" && mkdir -p "$dest/lineages"
    for name in $EXPERTS; do
        [ -d "$R/home-$name/lineages" ] && cp -r "$R/home-$name/lineages/." "$dest/lineages/"
    done
    [ -f "$R/memory.json" ] && cp "$R/memory.json" "$dest/memory.json"
    python3 - "$R" "$dest" $EXPERTS <<'EOF2'
import sys
from pathlib import Path
from klineage.library import Library
r, dest, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
with Library(dest / "library") as merged:
    for name in names:
        if (r / f"home-{name}" / "library").is_dir():
            with Library(r / f"home-{name}" / "library") as one:
                for skill in one.list():
                    merged.save(skill)
    print(f"merged library in {dest}: {len(merged.list())} skills")
EOF2
}

pipeline() {
    local minutes=$1 budget=$2
    local t0 deadline a_end
    t0=$(date +%s)
    deadline=$((t0 + minutes * 60))
    a_end=$((t0 + A_MINUTES * 60))
    env_setup
    stage "pipeline start: ${minutes} min, budget $budget, commit $KLINEAGE_COMMIT, mine [$MINE], prior ${PRIOR:-none}${WALK_DEVICE:+, walks on $WALK_DEVICE}"
    nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv >"$R/gpus.csv" 2>&1
    # one process first, alone: it writes the bytecode of everything a sandbox child imports (torch._dynamo
    # included) under PYTHONPYCACHEPREFIX, which the 11 mining and memory processes started next would otherwise
    # each compile at once (10.4 s writing it, 3.8 s reading it: session 13)
    python3 -c "import torch, triton, torch._dynamo, klineage.gates.correctness, klineage.gates.compile, \
klineage.gates.profile, klineage.guards, klineage.optimize; \
print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())" \
        >>"$R/gpus.csv" 2>&1
    if [ -n "$PRIOR" ]; then  # an earlier run's data directories: finished lineages are kept, unfinished resume
        for name in $EXPERTS; do
            [ -d "$PRIOR/home-$name" ] && cp -r "$PRIOR/home-$name" "$R/home-$name"
        done
        # its memory base too, so a bench-only run (MINE= FIXTURES=0 MEMORY=0) can use it, and its bench shards,
        # which `bench --resume` continues (what a shard finished there is claimed for it before any shard starts)
        [ -f "$PRIOR/memory.json" ] && cp "$PRIOR/memory.json" "$R/memory.json" &&
            cp "$PRIOR/memory.json" "$R/memory-prior.json"
        [ "$RESUME" = 1 ] && [ -d "$PRIOR/bench" ] && mkdir -p "$R/bench" && cp -r "$PRIOR/bench/." "$R/bench/"
    fi
    # the timer against triton's do_bench, on kernels of milliseconds and of tens of microseconds
    [ "${PROFILE:-1}" = 1 ] && (on_gpu 1 timeout 600 python3 benchmarks/profile_vs_do_bench.py --json "$R/profile_vs_do_bench.json" \
        >"$R/profile_vs_do_bench.log" 2>&1
        stage "profile gate vs do_bench: rc $?") &
    local early_memory=""
    if [ "$MEMORY" = 1 ] && [ "$WALK_DEVICE" = cpu ] && [ -n "$PRIOR" ]; then
        # walks made on the CPU hold every expert's simplest form already: the memory base needs no GPU-timed
        # lineage, so it is built beside the mining instead of after it (run 17 gave it 3 minutes after 6 of
        # mining, and it remembered 2 outcomes)
        merge_homes "$R/home-walks" >/dev/null
        memory_build "$R/home-walks" $((t0 + MEMORY_MINUTES * 60)) &
        early_memory=$!
    fi
    local waits=() gpu pair name
    for name in $MINE; do
        read -r gpu pair <<<"$(expert_pair "$name")"
        (on_gpu "$gpu" timeout "$(left_s "$a_end")" python3 benchmarks/mine_all.py --device "$DEVICE" \
            --home "$R/home-$name" --json "$R/mine-$name.json" --pair "$pair" \
            $([ "$RETIME" = 1 ] && echo --retime) ${WALK_DEVICE:+--walk-device "$WALK_DEVICE"} \
            >"$R/mine-$name.log" 2>&1
            stage "mined $name: rc $?") &
        waits+=($!)
    done
    if [ "$FIXTURES" = 1 ]; then
        (on_gpu 0 timeout "$(left_s "$deadline")" python3 benchmarks/mine_all.py --device "$DEVICE" \
            --set fixtures --home "$R/home-fixtures" --json "$R/mine-fixtures.json" >"$R/mine-fixtures.log" 2>&1
            stage "mined fixtures: rc $?") &
    fi
    if [ "$WAIT_MINING" = 1 ]; then
        for pid in "${waits[@]}"; do wait "$pid"; done
    fi
    stage "merging the data directories"
    merge_homes "$R/home"
    if [ -n "$early_memory" ]; then
        wait "$early_memory"
    elif [ "$MEMORY" = 1 ]; then
        memory_build "$R/home" $(($(date +%s) + MEMORY_MINUTES * 60))  # its own time, whenever mining ended
    fi
    [ -f "$R/memory.json" ] && cp "$R/memory.json" "$R/home/memory.json"
    if [[ ",$METHODS," == *",memory,"* ]] && ! python3 -c "import json, sys; sys.exit(not json.load(open(sys.argv[1])))" \
        "$R/home/memory.json" 2>/dev/null; then  # every shard alike, so their reports still merge
        METHODS=$(echo "$METHODS" | tr ',' '\n' | grep -vx memory | paste -sd, -)
        stage "no memory base (no expert lineage finished, or no outcome remembered, in time): the memory baseline is left out"
    fi
    # the GPU's ceilings (copy bandwidth, matmul rates: the roofline) measured once, on a quiet GPU, into the home
    # every shard copies: each shard measured them itself at its start, each in an exclusive turn, one after another
    KLINEAGE_HOME="$R/home" on_gpu 0 timeout 300 python3 -c "from klineage.check import ceilings_for
from klineage.cache import Cache
from klineage.config import Settings
from klineage.sandbox import Sandbox
s = Settings.from_env()
with Sandbox(warm=False) as sb:
    print(ceilings_for('$DEVICE', s, sb, Cache(s.cache_path)))" >"$R/ceilings.log" 2>&1
    stage "ceilings: $(tail -c 300 "$R/ceilings.log")"
    stage "bench: $SUITES, $METHODS, budget $budget, $SHARDS shards"
    mkdir -p "$R/bench"
    # one queue for all shards: with a fixed split (--shard I/N) three shards ran out of time on their third
    # instance in run 20 while others had finished; instances a resumed shard finished are claimed first
    rm -rf "$R/bench/queue"
    python3 - "$R/bench" <<'EOF2'
import json, sys
from pathlib import Path
from klineage.bench import Queue
queue = Queue(Path(sys.argv[1]) / "queue")
for report in Path(sys.argv[1]).glob("shard*/bench.json"):
    for name in json.loads(report.read_text())["stamp"]["instances"]:
        queue.claim(name)
EOF2
    # the queue hands out the longest instances first, by what each took in PRIOR's bench (its runs, references and
    # escape re-checks; the instances PRIOR never finished first): in run 20's order (the suite's) the 12 shards would
    # have needed about 1400 s, longest first about 1280 s, and the work was 1183 s a shard
    if [ -z "$INSTANCES" ] && [ -n "$PRIOR" ] && ls "$PRIOR"/bench/shard*/bench.json >/dev/null 2>&1; then
        INSTANCES=$(KLINEAGE_HOME="$R/home" python3 - "$SUITES" "$PRIOR"/bench/shard*/bench.json <<'EOF2'
import json, sys
from klineage.bench import suite
from klineage.config import Settings
seconds = {}
for path in sys.argv[2:]:
    report = json.load(open(path))
    for row in report["rows"]:
        seconds[row["instance"]] = seconds.get(row["instance"], 0.0) + row["seconds"]
    for name, parts in report.get("costs", {}).items():
        seconds[name] = seconds.get(name, 0.0) + sum(parts.values())
bare = {name.split(":", 1)[-1]: s for name, s in seconds.items()}  # one suite alone names its instances unprefixed
names = [i.name for i in suite(sys.argv[1], Settings.from_env())]
print(",".join(sorted(names, key=lambda n: -seconds.get(n, bare.get(n, float("inf"))))))
EOF2
)
        stage "queue order, longest first by PRIOR's bench: ${INSTANCES:0:120}..."
    fi
    local shard_pids=()
    for i in $(seq 1 "$SHARDS"); do
        rm -rf "$R/shard-home$i" && cp -r "$R/home" "$R/shard-home$i"
        (KLINEAGE_HOME="$R/shard-home$i" on_gpu $((i - 1)) timeout "$(left_s $((deadline - 20)))" \
            python3 -m klineage bench "$SUITES" --methods "$METHODS" --budget "$budget" --queue "$R/bench/queue" \
            ${INSTANCES:+--instances "$INSTANCES"} \
            --device "$DEVICE" --out "$R/bench/shard$i" --resume --json >>"$R/bench/shard$i.log" 2>&1
            stage "bench shard $i: rc $?") &
        shard_pids+=($!)
    done
    if [ "$GPU_TESTS" != 0 ]; then  # -v: each result logged as it ends (a cut run says which passed)
        [ "$GPU_TESTS" = 1 ] && GPU_TESTS=tests/gpu
        (on_gpu 0 timeout "$(left_s $((deadline - 20)))" python3 -m pytest -v -p no:cacheprovider -m gpu \
            $GPU_TESTS ${GPU_TESTS_K:+-k "$GPU_TESTS_K"} >"$R/gpu-tests.log" 2>&1
            stage "gpu tests: rc $?") &
    fi
    for pid in "${shard_pids[@]}"; do wait "$pid"; done
    wait
    stage "pipeline done"
    touch "$R/DONE"
}

pack() {
    env_setup
    local finished=()
    for d in "$R"/bench/shard*/; do [ -f "$d/bench.json" ] && finished+=("$d"); done
    if [ ${#finished[@]} -gt 0 ]; then
        python3 -m klineage bench-merge "${finished[@]}" --out "$R/report" >"$R/report.log" 2>&1 ||
            echo "bench-merge failed: $(tail -1 "$R/report.log")"
    fi
    tar -czf "$OUT/results.tgz" -C "$(dirname "$R")" --exclude='shard-home*' --exclude='cache.sqlite' \
        "$(basename "$R")"
    cp "$R/stages.txt" "$OUT/" 2>/dev/null
    [ -f "$R/report/bench.md" ] && cp "$R/report/bench.md" "$OUT/bench.md"
}

status_line() {
    local rows=0 n
    for j in "$R"/bench/shard*/bench.json; do
        [ -f "$j" ] && n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']))" "$j") &&
            rows=$((rows + n))
    done
    # the shards' progress lines (KLINEAGE_PROGRESS_LINES): gate evaluations finished so far, all methods
    n=$(cat "$R"/bench/shard*.log 2>/dev/null | grep -c ": evaluation [0-9]")
    echo "$(date -u +%H:%M:%S) last: $(tail -1 "$R/stages.txt" 2>/dev/null) | bench rows written: $rows | evaluations: $n"
}

poll() {
    # the wait is capped so that the last status line, the packing and the call's own start fit in the device
    # tool's 600 s: `poll 590` (session 21) slept past its end in 20 s steps, packed, and the call was cut at 600 s
    # with nothing brought back
    local wait_s=$1 cap="${POLL_CAP_S:-540}"
    if [ "$wait_s" -gt "$cap" ]; then
        echo "poll: waiting ${cap} s, not ${wait_s} (POLL_CAP_S; packing and the call's start need the rest of 600 s)"
        wait_s=$cap
    fi
    local end=$(($(date +%s) + wait_s)) left
    if [ ! -f "$R/stages.txt" ]; then
        echo "no pipeline on this machine: it was given back, and its results with it"
        exit 3
    fi
    while [ "$(date +%s)" -lt "$end" ] && [ ! -f "$R/DONE" ]; do
        left=$(left_s "$end")
        sleep $((left < 20 ? left : 20))
        status_line
    done
    pack
    cat "$R/stages.txt"
    [ -f "$R/report/bench.md" ] && head -20 "$R/report/bench.md"
}

case "${1:-}" in
start)
    minutes="$2" budget="$3" poll_s="$4"
    rm -rf "$RUN" "$R" && mkdir -p "$R" && cp -r . "$RUN"
    # every process of the background list writes to the log, the subshell around it included: with only the
    # pipeline redirected, that subshell held the call's stdout open until the pipeline ended, so `start ... | tail`
    # waited for the whole run (session 20: a device call ran to its 600 s limit)
    (cd "$RUN" && setsid nohup bash benchmarks/h200_eval.sh pipeline "$minutes" "$budget") >"$R/pipeline.log" 2>&1 \
        </dev/null &
    sleep 5
    poll "$poll_s"
    ;;
pipeline) pipeline "$2" "$3" ;;
walks) walks "$2" "${3:-2}" ;;
poll) poll "$2" ;;
*)
    echo "usage: $0 start MINUTES BUDGET POLL_S | poll POLL_S | walks DIR [JOBS]" >&2
    exit 2
    ;;
esac
