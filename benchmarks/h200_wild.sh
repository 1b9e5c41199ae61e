#!/usr/bin/env bash
# Issue 31's GPU acceptance on one H200 (device kind nvidia-h200), as one background pipeline that outlives the
# device tool's 10-minute calls (the machine stays warm while calls follow each other closely; every call brings
# back what has finished so far):
#
#   bash benchmarks/h200_wild.sh start MINUTES BUDGET POLL_S   # copy the tree to $RUN, launch the pipeline, poll
#   bash benchmarks/h200_wild.sh poll POLL_S                   # wait up to POLL_S (at most 540), pack into $OUT
#   DEVICE=cpu bash benchmarks/h200_wild.sh walks DIR JOBS     # here, without a GPU: every walk into DIR/home-NAME,
#                                                              # JOBS at a time (a device run's PRIOR)
#   bash benchmarks/h200_wild.sh library WALKS EFFECTS OUT     # here: WALKS given a run's effects/ (committed under
#                                                              # docs/runs), merged into the library OUT (LIBRARY=;
#                                                              # over BASE_LIBRARY's skills where it is set)
#
# The pipeline, all of it stopped at MINUTES after the start (what finished is kept):
#   T. the GPU tests named by GPU_TESTS_K (those not yet run on a GPU), beside A;
#   A. every expert mined on the GPU, walked and timed (`klineage mine-ecosystem --only NAME`, and the six bundled
#      experts through `klineage mine`), MINE_JOBS at a time, each in its own data directory, --max-steps
#      MAX_STEPS --no-probe (probing on the GPU does not fit this budget: the skills keep their conditions unprobed);
#      mining stops at A_MINUTES and the finished walks' skills are merged into one library; with PRIOR=DIR (a
#      `walks` folder made on a CPU, carried) each walk resumes from DIR/home-NAME with `--walk-device cpu`: the
#      steps walked there are timed on the GPU (under the same --max-steps); a walk DIR/stages.txt does not list as
#      mined there (it failed, or WALK_DEVICE=cpu and it is not in DIR) is walked on this machine's CPU first;
#      with TIMED=DIR (home-NAME folders an earlier run on the same GPU kind timed: its results.tgz homes) those
#      experts are not mined again, their homes joining this run's for the merge (timing split over sessions);
#      with LIBRARY=DIR (an earlier run's results.tgz home/library, from the same GPU kind) no expert is mined:
#      a suite split over sessions (INSTANCES) runs every part with one library; with BASE_LIBRARY=DIR instead, the
#      experts named (ECOSYSTEM, BUNDLED) are mined and their skills merged over DIR's (a deeper walk of one expert,
#      PRIOR holding it, timed and added to a library the other experts' earlier timings made);
#   B. `klineage bench SUITE` (wild or wild-quant) with METHODS under BUDGET, SHARDS processes sharing one queue,
#      each rewriting its report after every instance and re-timing every final program in a fresh process (always
#      on for a wild suite); with THEN_SUITE (and THEN_INSTANCES) a shard whose queue ran dry takes up that suite's
#      queue next, into bench2/ and report2/ (two suites in one warm machine's time).
# Jobs take turns at the GPU's clock through KLINEAGE_GPU_LOCK (klineage.sandbox.gpu_turn).
# Before the call, here: `git rev-parse --short HEAD > .state/COMMIT`; the call carries .whl (libcst, liger-kernel,
# flag_gems, triton_kernels, fla-core, flash-linear-attention, sqlalchemy, PyYAML, einops, packaging,
# typing_extensions; torchao and bitsandbytes for wild-quant: the device has no network) and .state. DEVICE=cpu
# makes a dry run without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/klineage-out}"
RUN="${RUN:-/tmp/klrun-wild}"
R="${RESULTS:-/tmp/klres-wild}"
DEVICE="${DEVICE:-cuda}"
A_MINUTES="${A_MINUTES:-10}"
MINE_JOBS="${MINE_JOBS:-6}"
MAX_STEPS="${MAX_STEPS:-4}"
SHARDS="${SHARDS:-8}"
METHODS="${METHODS:-klineage,blind,autotune}"
SUITE="${SUITE:-wild}"             # wild or wild-quant (klineage.bench.suites.WILD_SUITES)
INSTANCES="${INSTANCES:-}"        # comma-separated instances of SUITE (empty: the whole suite)
THEN_SUITE="${THEN_SUITE:-}"      # a second suite each shard takes up once SUITE's queue is empty (into bench2/)
THEN_INSTANCES="${THEN_INSTANCES:-}"  # its instances (empty: the whole suite)
ECOSYSTEM="${ECOSYSTEM-all}"      # comma-separated ecosystem experts, "all", or empty for none
BUNDLED="${BUNDLED-matmul attention rmsnorm cross_entropy swiglu softmax}"
SITE="${SITE:-/tmp/site}"          # the packages' folder (.whl installed there once; here: one made by hand)
PRIOR="${PRIOR:-}"                # a `walks` folder made without a GPU (carried): its steps are timed here
WALK_DEVICE="${WALK_DEVICE:-}"    # cpu: a walk not in PRIOR is walked on this machine's CPU, then timed
LIBRARY="${LIBRARY:-}"            # a library folder made by an earlier run on this GPU kind (carried): no stage A
BASE_LIBRARY="${BASE_LIBRARY:-}"  # such a library that stage A's walks are merged over (not with LIBRARY)
TIMED="${TIMED:-}"                # home-NAME folders timed by earlier runs on this GPU kind (carried): not mined again
# a suite split over sessions runs every part at one commit: `git archive --format=tar.gz -o .state/tree.tgz C` and
# `echo C > .state/COMMIT` here, then TREE=.state/tree.tgz: `start` runs that tree, not the checkout's
TREE="${TREE:-}"
ORDER="${ORDER:-}"                # longest: the bench queue longest first (wild_ledger.py --queue-order)
# the queue closes CLOSE_MIN minutes before the pipeline's end (empty: never): no shard takes a new instance after
# that, so those under way finish with the GPU's turns to themselves, and the pipeline ends when they do. 19 minutes
# with 16 shards: the 10 instances claimed after 10 minutes were all cut, and the four longest were cut in their last
# stage (RESULTS.md#wild-16). Needs INSTANCES (the names to close)
CLOSE_MIN="${CLOSE_MIN:-}"
GPU_TESTS_FILES="${GPU_TESTS_FILES:-tests/gpu/test_gates_gpu.py tests/gpu/test_optimize_gpu.py}"
# the GPU tests not yet run on a GPU: the NVML busy share (many_tiny_launches) with the clock tests beside it
GPU_TESTS_K="${GPU_TESTS_K-many_tiny_launches or patched_clock or honest_profile_records or cheat_fails_on_gpu or control_passes_on_gpu}"
mkdir -p "$OUT"

env_setup() {
    # .whl holds the device's wheels (cp312): on another Python (a laptop's `walks`, `library`) SITE is made by hand
    local tag
    tag=cp$(python3 -c 'import sys; print(*sys.version_info[:2], sep="")')
    if [ -d .whl ] && [ ! -f "$SITE/.done" ]; then
        if compgen -G ".whl/*-$tag-*.whl" >/dev/null; then
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
                .whl/*.whl && touch "$SITE/.done"
        else
            echo "SITE=$SITE: .whl has no $tag wheels; install the packages there by hand, then touch $SITE/.done" >&2
        fi
    fi
    export PYTHONPATH="$SITE:$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    export KLINEAGE_SEED_CASE=tiny PYTHONUNBUFFERED=1 KLINEAGE_INPUT_CACHE=/dev/shm/klineage-inputs
    export KLINEAGE_PROGRESS_LINES=1 GEMS_VENDOR=nvidia KLINEAGE_GPU_LOCK=/tmp/klineage-gpu0.lock
    # bytecode under a prefix of our own: the image's torch ships none and sets PYTHONDONTWRITEBYTECODE (h200_eval.sh)
    unset PYTHONDONTWRITEBYTECODE
    export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-/tmp/klineage-pycache}"
    KLINEAGE_COMMIT="$(cat .state/COMMIT 2>/dev/null || echo unknown)"
    export KLINEAGE_COMMIT
}

left_s() { local s=$(($1 - $(date +%s))); echo $((s > 1 ? s : 1)); }

stage() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$R/stages.txt"; }

bundled_args() {  # bundled_args NAME: the workload, the expert and the installed modules `klineage mine` takes
    local E=src/klineage/examples
    case "$1" in
    matmul) echo "$E/matmul/workload.py $E/matmul/expert.py" ;;
    attention) echo "$E/attention/workload.py $E/attention/expert.py" ;;
    softmax) echo "$E/softmax/workload.py $E/softmax/expert.py" ;;
    rmsnorm) echo "$E/rmsnorm/workload.py $E/rmsnorm/liger.py --module liger_kernel.ops.rms_norm" ;;
    cross_entropy) echo "$E/cross_entropy/workload.py $E/cross_entropy/liger.py --module liger_kernel.ops.cross_entropy" ;;
    swiglu) echo "$E/swiglu/workload.py $E/swiglu/liger.py --module liger_kernel.ops.swiglu" ;;
    esac
}

mine_one() {  # mine_one KIND NAME END: one expert walked and timed in $R/home-NAME, stopped at END
    local kind=$1 name=$2 end=$3 t0 rc walk=()
    t0=$(date +%s)
    if [ -n "$PRIOR" ] && [ -d "$PRIOR/home-$name" ]; then
        rm -rf "$R/home-$name" && cp -r "$PRIOR/home-$name" "$R/home-$name" && walk=(--walk-device cpu)
    fi
    [ "$WALK_DEVICE" = cpu ] && [ "$DEVICE" = cuda ] && walk=(--walk-device cpu)
    if [ ${#walk[@]} -gt 0 ] && ! grep -q "mined $kind $name: rc 0" "$PRIOR/stages.txt" 2>/dev/null; then
        # not walked there (or its walk failed): walked here on the CPU first, for --walk-device cpu to time it.
        # A gate's limit of WALK_TIMEOUT s: an autotuned expert's own compile gate compiles every config for sm_90,
        # over the default 300 s for gems_weight_norm on 2 idle cores and on the H100 host beside 11 timings
        # (RESULTS.md#wild-h100-4); 615 s with 1500 (BENCHMARKS.md, 2026-12-05)
        # shellcheck disable=SC2046
        KLINEAGE_TIMEOUT="${WALK_TIMEOUT:-1500}" KLINEAGE_HOME="$R/home-$name" KLINEAGE_GPU_LOCK="" timeout "$(left_s "$end")" python3 -m klineage \
            $([ "$kind" = ecosystem ] && echo "mine-ecosystem --only $name" || echo "mine $(bundled_args "$name")") \
            --device cpu --max-steps "$MAX_STEPS" --no-probe --json >"$R/walk-$name.json" 2>"$R/walk-$name.log"
    fi
    if [ "$kind" = ecosystem ]; then
        KLINEAGE_HOME="$R/home-$name" timeout "$(left_s "$end")" python3 -m klineage mine-ecosystem --only "$name" \
            --device "$DEVICE" "${walk[@]}" --max-steps "$MAX_STEPS" --no-probe --json \
            >"$R/mine-$name.json" 2>"$R/mine-$name.log"
    else
        # shellcheck disable=SC2046
        KLINEAGE_HOME="$R/home-$name" timeout "$(left_s "$end")" python3 -m klineage mine $(bundled_args "$name") \
            --device "$DEVICE" "${walk[@]}" --max-steps "$MAX_STEPS" --no-probe --json \
            >"$R/mine-$name.json" 2>"$R/mine-$name.log"
    fi
    rc=$?
    stage "mined $kind $name: rc $rc, $(($(date +%s) - t0)) s"
}

base_library() {  # BASE_LIBRARY (where set) as $R/home/library, which the walks' skills are then saved over: a
    # skill walked again replaces its own
    [ -z "$BASE_LIBRARY" ] || { mkdir -p "$R/home" && cp -r "$BASE_LIBRARY" "$R/home/library"; }
}

merge_libraries() {  # every finished walk's skills into $R/home/library
    python3 - "$R" <<'EOF2'
import sys
from pathlib import Path
from klineage.library import Library
r = Path(sys.argv[1])
with Library(r / "home" / "library") as merged:
    for lib in sorted(r.glob("home-*/library")):
        with Library(lib) as one:
            for skill in one.list():
                merged.save(skill)
    print(f"merged library: {len(merged.list())} skills from {len(list(r.glob('home-*/library')))} data directories")
EOF2
}

export_effects() {  # every home's GPU-timed steps into $R/effects/NAME.json: hashes and numbers, no source, so a
    # run's timings can be committed and a later session rebuilds the library from CPU walks (`library` below)
    local home name n=0
    mkdir -p "$R/effects"
    for home in "$R"/home-*/; do
        name=$(basename "$home") && name=${name#home-}
        python3 -m klineage effects export "$R/effects/$name.json" --home "$home" >>"$R/effects/export.log" 2>&1 &&
            n=$((n + 1))
    done
    stage "effects exported: $n homes"
}

library() {  # library WALKS EFFECTS OUT: here, no GPU: each WALKS/home-NAME (a `walks` folder) given the effects
    # EFFECTS/NAME.json measured (`effects import`), the skills merged into OUT: the library a device run built,
    # from committed effects
    local walks=$1 effects=$2 out=$3 home name
    R="$(mktemp -d)" && env_setup
    for home in "$walks"/home-*/; do
        name=$(basename "$home") && name=${name#home-}
        cp -r "$home" "$R/home-$name"
        if [ ! -f "$effects/$name.json" ]; then
            echo "no effects for $name: its skills stay untimed"
        elif ! python3 -m klineage effects import "$effects/$name.json" --home "$R/home-$name" --json \
            >"$R/import-$name.json" 2>&1; then
            echo "import failed for $name: $(tail -1 "$R/import-$name.json")"
        fi
    done
    base_library
    merge_libraries
    rm -rf "$out" && cp -r "$R/home/library" "$out" && echo "library written to $out"
}

expert_names() {  # the experts to mine, as "KIND NAME" entries in the array names
    names=()
    if [ "$ECOSYSTEM" = all ]; then
        while read -r n; do names+=("ecosystem $n"); done < <(python3 -c \
            "from klineage.suites.ecosystem import select; print('\n'.join(e.name for e in select()))")
    elif [ -n "$ECOSYSTEM" ]; then
        for n in ${ECOSYSTEM//,/ }; do names+=("ecosystem $n"); done
    fi
    for n in $BUNDLED; do names+=("bundled $n"); done
}

walks() {  # walks DIR JOBS: every expert walked here on the CPU into DIR/home-NAME (no timing); a device run's PRIOR
    local dir=$1 jobs=$2 entry kind name
    R="$dir" && mkdir -p "$R"
    env_setup
    export KLINEAGE_GPU_LOCK="" KLINEAGE_TIMEOUT="${KLINEAGE_TIMEOUT:-${WALK_TIMEOUT:-1500}}"  # as in mine_one
    expert_names
    stage "walks here: ${#names[@]} experts, $jobs at a time, max $MAX_STEPS steps, device $DEVICE"
    for entry in "${names[@]}"; do
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
        read -r kind name <<<"$entry"
        mine_one "$kind" "$name" "$(($(date +%s) + 86400))" &
    done
    wait
    stage "walks done"
}

bench_shard() {  # bench_shard SUITE INSTANCES QUEUE OUT DEADLINE BUDGET: one process of a suite's shared queue
    local suite=$1 instances=$2 queue=$3 out=$4 deadline=$5 budget=$6
    KLINEAGE_HOME="$R/home" timeout "$(left_s "$deadline")" python3 -m klineage bench "$suite" \
        --methods "$METHODS" --budget "$budget" --device "$DEVICE" --library "$R/home/library" \
        ${instances:+--instances "$instances"} --queue "$queue" --out "$out" >"$out.log" 2>&1
}

pipeline() {
    local minutes=$1 budget=$2 t0 deadline a_end names pids=() i
    t0=$(date +%s)
    deadline=$((t0 + minutes * 60))
    a_end=$((t0 + A_MINUTES * 60))
    env_setup
    stage "pipeline start: ${minutes} min, budget $budget, commit $KLINEAGE_COMMIT, device $DEVICE"
    nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv >"$R/gpus.csv" 2>&1
    python3 -c "import torch, triton, torch._dynamo, klineage.gates.correctness, klineage.gates.compile, \
klineage.gates.profile, klineage.guards, klineage.optimize; \
print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())" \
        >>"$R/gpus.csv" 2>&1
    python3 -m klineage mine-ecosystem --list >"$R/ecosystem-list.txt" 2>&1
    # what bounds the run: the host's load and the GPU's use every 15 s (the H100 runs' evaluations held the GPU for
    # under 1 s of their 30-50 s: RESULTS.md#wild-h100-2)
    (while [ ! -f "$R/DONE" ]; do
        echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) gpu $(nvidia-smi \
            --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null | head -1)" >>"$R/load.txt"
        sleep 15
    done) &
    disown $!  # out of the job table: the mining's job count and the final wait do not see it
    if [ -n "$GPU_TESTS_K" ] && [ "$DEVICE" = cuda ]; then
        (timeout "$(left_s "$a_end")" python3 -m pytest -p no:cacheprovider -v --tb=long --tier gpu -n 2 \
            $GPU_TESTS_FILES -k "$GPU_TESTS_K" >"$R/gpu-tests.log" 2>&1
            stage "gpu tests: rc $? ($(grep -cE ' PASSED' "$R/gpu-tests.log") passed, $(grep -cE ' FAILED|ERROR ' "$R/gpu-tests.log") failed)") &
    fi
    if [ -n "$LIBRARY" ]; then  # an earlier run's merged library (its results' home/library), timed on this kind
        mkdir -p "$R/home" && cp -r "$LIBRARY" "$R/home/library"
        stage "library from $LIBRARY: $(find "$R/home/library/skills" -name '*.json' | wc -l) skills, no mining"
    else
        expert_names
        stage "mining ${#names[@]} experts, $MINE_JOBS at a time, until $(date -u -d "@$a_end" +%H:%M:%S)"
        for entry in "${names[@]}"; do
            read -r kind name <<<"$entry"
            if [ -n "$TIMED" ] && [ -d "$TIMED/home-$name" ]; then
                cp -r "$TIMED/home-$name" "$R/home-$name" && stage "timed earlier: $kind $name" && continue
            fi
            while [ "$(jobs -rp | wc -l)" -ge "$((MINE_JOBS + 1))" ]; do sleep 1; done  # + the tests' job
            [ "$(date +%s)" -ge "$a_end" ] && { stage "not started (mining time over): $entry"; continue; }
            mine_one "$kind" "$name" "$a_end" &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid"; done
        base_library && [ -n "$BASE_LIBRARY" ] &&
            stage "base library $BASE_LIBRARY: $(find "$R/home/library/skills" -name '*.json' | wc -l) skills"
        merge_libraries >>"$R/stages.txt" 2>&1
        stage "library merged"
        export_effects
    fi
    mkdir -p "$R/bench"
    pids=()
    [ -n "$THEN_SUITE" ] && mkdir -p "$R/bench2"
    if [ "$ORDER" = longest ]; then  # the queue longest first, from the committed reports (here: the wheels are in)
        INSTANCES=$(python3 benchmarks/wild_ledger.py docs/runs --queue-order "$SUITE" \
            ${INSTANCES:+--instances "$INSTANCES"}) && stage "queue, longest first: $INSTANCES"
    fi
    for i in $(seq 1 "$SHARDS"); do
        (bench_shard "$SUITE" "$INSTANCES" "$R/queue" "$R/bench/shard$i" "$deadline" "$budget"
            stage "bench shard $i: rc $?"
            if [ -n "$THEN_SUITE" ]; then  # a shard whose first queue ran dry goes on to the second at once
                bench_shard "$THEN_SUITE" "$THEN_INSTANCES" "$R/queue2" "$R/bench2/shard$i" "$deadline" "$budget"
                stage "bench2 shard $i ($THEN_SUITE): rc $?"
            fi) &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    wait
    stage "pipeline done"
    touch "$R/DONE"
}

close_queue() {  # close_queue DELAY_S: after DELAY_S, every instance of INSTANCES no shard has claimed is claimed here
    local name closed=()
    sleep "$1"
    mkdir -p "$R/queue"
    for name in ${INSTANCES//,/ }; do
        # the claim file klineage.bench.run.Queue makes, created exclusively (noclobber) as a shard creates it
        (set -o noclobber; echo "$name closed by the pipeline $(date -u +%FT%T)" >"$R/queue/$name.claim") 2>/dev/null &&
            closed+=("$name")
    done
    stage "queue closed, ${#closed[@]} not started: $(IFS=,; echo "${closed[*]}")"
}

pack() {
    env_setup
    local finished suffix
    for suffix in "" 2; do  # bench/ into report/, a THEN_SUITE's bench2/ into report2/
        finished=()
        for d in "$R"/bench$suffix/shard*/; do [ -f "$d/bench.json" ] && finished+=("$d"); done
        if [ ${#finished[@]} -gt 0 ]; then
            python3 -m klineage bench-merge "${finished[@]}" --out "$R/report$suffix" >"$R/report$suffix.log" 2>&1 ||
                echo "bench-merge failed: $(tail -1 "$R/report$suffix.log")"
        fi
    done
    tar -czf "$OUT/results.tgz" -C "$(dirname "$R")" --exclude='cache.sqlite' --exclude='inputs' \
        --exclude='*.lock' --exclude='kernels' --exclude='ecosystem' --exclude='wild' "$(basename "$R")"
    cp "$R/stages.txt" "$OUT/" 2>/dev/null
    # one file: the device tool brings back a handful of files a folder (31 effects/*.json were left out)
    [ -d "$R/effects" ] && tar -czf "$OUT/effects.tgz" -C "$R" effects
    [ -f "$R/report/bench.md" ] && cp "$R/report/bench.md" "$OUT/bench.md"
    [ -f "$R/report2/bench.md" ] && cp "$R/report2/bench.md" "$OUT/bench2.md"
}

status_line() {
    local n
    n=$(cat "$R"/bench*/shard*.log 2>/dev/null | grep -c ": evaluation [0-9]")
    echo "$(date -u +%H:%M:%S) last: $(tail -1 "$R/stages.txt" 2>/dev/null) | bench evaluations: $n"
}

poll() {  # capped so the packing and the call's own start fit in the device tool's 600 s (h200_eval.sh)
    local wait_s=$1 cap="${POLL_CAP_S:-540}" end
    [ "$wait_s" -gt "$cap" ] && wait_s=$cap
    end=$(($(date +%s) + wait_s))
    if [ ! -f "$R/stages.txt" ]; then
        echo "no pipeline on this machine: it was given back, and its results with it"
        exit 3
    fi
    local packed="" now
    while [ "$(date +%s)" -lt "$end" ] && [ ! -f "$R/DONE" ]; do
        sleep $(($(left_s "$end") < 30 ? $(left_s "$end") : 30))
        status_line
        # packed again whenever a shard's report changed: a call the device tool stops early (less device time
        # left than its limit) still brings back what finished, as $OUT is returned as it stands
        now=$(ls -l --time-style=+%s "$R"/bench*/shard*/bench.json 2>/dev/null | md5sum)
        [ "$now" != "$packed" ] && { pack >/dev/null; packed=$now; }
    done
    pack
    cat "$R/stages.txt"
    [ -f "$R/report/bench.md" ] && head -40 "$R/report/bench.md"
    [ -f "$R/report2/bench.md" ] && head -60 "$R/report2/bench.md"
}

case "${1:-}" in
start)
    minutes="$2" budget="$3" poll_s="$4"
    rm -rf "$RUN" "$R" && mkdir -p "$R" "$RUN"
    if [ -n "$TREE" ]; then  # an earlier commit's tree, with this checkout's wheels and state beside it
        tar -xzf "$TREE" -C "$RUN" && cp -r .whl .state "$RUN"/
    else
        tar --exclude=./.venv --exclude=./.git -cf - . | tar -xf - -C "$RUN"
    fi
    # the whole background list writes to the log, or the call's stdout stays open until the pipeline ends
    (cd "$RUN" && setsid nohup bash benchmarks/h200_wild.sh pipeline "$minutes" "$budget") >"$R/pipeline.log" 2>&1 \
        </dev/null &
    if [ -n "$CLOSE_MIN" ] && [ -n "$INSTANCES" ] && [ "$minutes" -gt "$CLOSE_MIN" ]; then
        setsid nohup bash benchmarks/h200_wild.sh close "$(((minutes - CLOSE_MIN) * 60))" >>"$R/pipeline.log" 2>&1 \
            </dev/null &
    fi
    sleep 5
    poll "$poll_s"
    ;;
pipeline) pipeline "$2" "$3" ;;
close) close_queue "$2" ;;
walks) walks "$2" "${3:-2}" ;;
library) library "$2" "$3" "$4" ;;
poll) poll "$2" ;;
*)
    echo "usage: $0 start MINUTES BUDGET POLL_S | poll POLL_S | walks DIR JOBS | library WALKS EFFECTS OUT" >&2
    exit 2
    ;;
esac
