#!/usr/bin/env bash
# Installs DuckDB's Python package, pinned, for the DuckDB checks of the
# DataFusion member's tests (filterstore-datafusion/tests/sql/duckdb.rs),
# into DIR (default: $CARGO_TARGET_DIR/duckdb-py, else target/duckdb-py),
# and prints DIR; the tests find it in FILTERSTORE_DUCKDB_PYTHONPATH:
#
#   export FILTERSTORE_DUCKDB_PYTHONPATH="$(scripts/install-duckdb.sh)"
#
# Needs python3 with pip and the Python package index; installs nothing
# outside DIR, and nothing when DIR already holds this version.
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.0.1
dir="${1:-${CARGO_TARGET_DIR:-target}/duckdb-py}"
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
if ! PYTHONPATH="$dir" python3 -c "import sys, duckdb; sys.exit(duckdb.__version__ != '$version')" 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade --target "$dir" \
        "duckdb==$version" >&2
fi
echo "$dir"
