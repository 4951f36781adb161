#!/usr/bin/env bash
# No test seam is compiled into a release build without the test features.
#
# The seams: the core's injected I/O failures (`store::disk::io::fault`, a
# thread-local plan `PLAN`, feature `test-internals`) and the DataFusion
# member's fault injection by filter (`runtime::hooks`, feature
# `test-hooks`). Each binary is built twice, as CI's test run builds it (the
# workspace, every feature) and as a user builds it (README's commands, no
# test feature), and its symbol table is read:
#   * with the features, the seam's symbols must be there: a check that
#     cannot find them proves nothing, and it fails;
#   * without them, none may be there.
# Every build here is one CI made before (`cargo test --release --workspace
# --all-features`, then scripts/readme-commands.sh), so cargo only copies
# the binaries out of its cache. Run from the workspace root, after those.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}/release"

# binary, pattern of its seam's symbols
seams=(
    "filterstore" 'filterstore::store::disk::io::fault::plan::PLAN'
    "filterstore-worker" 'filterstore_datafusion::runtime::hooks::'
)

# Prints how many of $1's symbols match $2.
count() {
    nm -C "$target/$1" | grep -c -- "$2" || true
}

cargo build --release --quiet --workspace --all-features --bins
declare -A with
for ((i = 0; i < ${#seams[@]}; i += 2)); do
    with[${seams[i]}]=$(count "${seams[i]}" "${seams[i + 1]}")
done

cargo build --release --quiet --bin filterstore
cargo build --release --quiet -p filterstore-datafusion --bin filterstore-worker

status=0
for ((i = 0; i < ${#seams[@]}; i += 2)); do
    bin=${seams[i]}
    without=$(count "$bin" "${seams[i + 1]}")
    echo "no-seams: $bin: ${with[$bin]} seam symbols with the test features, $without without"
    if [ "${with[$bin]}" -eq 0 ]; then
        echo "no-seams: $bin: the seam's symbols (${seams[i + 1]}) were not found even with the test features; update this check" >&2
        status=1
    fi
    if [ "$without" -ne 0 ]; then
        echo "no-seams: $bin: a test seam is compiled into the release build without the test features" >&2
        status=1
    fi
done
exit "$status"
