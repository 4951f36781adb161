#!/usr/bin/env bash
# Loops a test with both cores oversubscribed, looking for hangs: LOOPS
# parallel loops of RUNS runs each, plus HOGS CPU hogs (one per core by
# default). A run that exceeds TIMEOUT seconds counts as a hang: every
# thread's backtrace goes to $OUT/hang-<loop>-<run>.txt (gdb) and the run is
# killed.
#
# By default it loops tests/guard/stress.rs, the guard's storage under
# concurrent writers, readers and merges: what the store still keeps in sled
# 0.34.7, whose writer can deadlock against its own thread pool (#804; the
# argument why it cannot here is in src/store/engine/mod.rs). The test that hung
# before the engine existed, store_regen's concurrent writers during a
# regeneration, no longer touches sled; it is looped with
# BIN=store TEST=regen::concurrent_writers_during_regeneration_lose_nothing.
# (TEST is the test's full name in its binary, module path included: it is
# run with --exact.)
#
#   scripts/hang-loop.sh                 # 2 loops x 5000 runs, 120 s each
#   RUNS=100 LOOPS=2 scripts/hang-loop.sh
#   BIN=store TEST=some_module::some_test scripts/hang-loop.sh
#
# Prints one line per 50 runs and a summary; exits 1 if any run hung or failed.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-5000}"
LOOPS="${LOOPS:-2}"
TIMEOUT="${TIMEOUT:-120}"
HOGS="${HOGS:-$(nproc)}"
BIN="${BIN:-guard}"
TEST="${TEST:-stress::guarded_traffic_with_merges_answers_right_and_ends}"
OUT="${OUT:-target/hang-loop}"
mkdir -p "$OUT"

bin=$(cargo test --release -p filterstore --all-features --test "$BIN" --no-run \
    --message-format=json 2>/dev/null |
    grep "\"name\":\"$BIN\"" | grep '"test":true' |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build the $BIN test binary" >&2; exit 2; }
# A private copy: a rebuild during the loop must not change what it runs.
cp "$bin" "$OUT/$BIN.bin"
bin="$OUT/$BIN.bin"
echo "binary $bin ($(git rev-parse --short HEAD 2>/dev/null || echo '?')); $LOOPS loops x $RUNS runs of $TEST, timeout ${TIMEOUT}s; $(nproc) cores, $HOGS hogs"

# The binary must pass once before the loop means anything.
"$bin" --exact "$TEST" --test-threads 1 >"$OUT/first.log" 2>&1 ||
    { echo "the first run failed:" >&2; cat "$OUT/first.log" >&2; exit 2; }
grep -q "1 passed" "$OUT/first.log" ||
    { echo "the first run did not run $TEST:" >&2; cat "$OUT/first.log" >&2; exit 2; }

hogs=()
for _ in $(seq "$HOGS"); do
    (while :; do :; done) &
    hogs+=($!)
done
trap '[ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true' EXIT

one_loop() {
    local loop=$1 hangs=0 fails=0
    for run in $(seq "$RUNS"); do
        "$bin" --exact "$TEST" --test-threads 1 >"$OUT/last-$loop.log" 2>&1 &
        local pid=$! waited=0
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$((TIMEOUT * 10))" ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$pid" 2>/dev/null; then
            hangs=$((hangs + 1))
            gdb -p "$pid" -batch -ex "thread apply all bt" >"$OUT/hang-$loop-$run.txt" 2>&1 || true
            kill -9 "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            echo "loop $loop run $run: HANG (backtrace in $OUT/hang-$loop-$run.txt)"
        elif ! wait "$pid"; then
            fails=$((fails + 1))
            cp "$OUT/last-$loop.log" "$OUT/fail-$loop-$run.log"
            echo "loop $loop run $run: FAILED (log in $OUT/fail-$loop-$run.log)"
        fi
        if [ $((run % 50)) -eq 0 ]; then
            echo "loop $loop: $run runs, $hangs hangs, $fails failures ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))"
        fi
    done
    echo "$hangs $fails" >"$OUT/result-$loop"
}

loops=()
for loop in $(seq "$LOOPS"); do
    one_loop "$loop" &
    loops+=($!)
done
wait "${loops[@]}"

total_hangs=0
total_fails=0
for loop in $(seq "$LOOPS"); do
    read -r h f <"$OUT/result-$loop"
    total_hangs=$((total_hangs + h))
    total_fails=$((total_fails + f))
done
echo "RESULT hang_loop_runs $((RUNS * LOOPS)) runs; hangs $total_hangs; failures $total_fails"
[ "$total_hangs" -eq 0 ] && [ "$total_fails" -eq 0 ]
