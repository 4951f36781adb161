#!/usr/bin/env bash
# Runs the cargo commands the READMEs give, as written, so that a README that
# drifts from the code fails CI. Called by .ci/run after the workspace tests.
#
# Which commands: every line of a fenced ```sh block whose command (after any
# VAR=value assignments) is `cargo`, in README.md (run from the repository
# root), in filterstore-datafusion/README.md (run from
# filterstore-datafusion/, where its reader stands) and in docs/BENCHMARKS.md
# (run from docs/; cargo finds the workspace above it). A line ending in `\`
# continues on the next. Other lines of those blocks are listed, not run.
#
# THE MARKER: a command whose trailing comment contains `[slow]` is too slow
# for CI (a whole benchmark, the 100M-key peers run, the full test suite that
# .ci/run runs itself). It is checked, not run:
#
#     cargo bench --bench peers   # ~10 min per size [slow]
#
# A check runs the command as written, with a rustc wrapper, a rustdoc and a
# runner that compile and execute nothing: cargo must accept the command's
# flags, packages, features and target names, resolve them, and reach the
# point where it would compile or run (a refused flag, an unknown target or a
# target whose required features are missing fails). Every other command runs
# for real and must exit 0, within READMECMD_TIMEOUT seconds (default 1800).
#
# The DataFusion member: before any command of filterstore-datafusion/README.md
# runs (or, marked, instead), its check must find no crate outside this
# workspace to compile. .ci/run has just built every dependency in its one
# configuration, so a dependency that a README command would compile again
# means that command selects another feature configuration: DataFusion
# rebuilt (~30 min), which is refused rather than run. (Run this script after
# .ci/run's test step, or another build of that configuration, for the same
# reason.) The check sees the crates cargo starts before its first refusal;
# with more ready than cargo's job slots, a later one may go unseen.
#
# No command may change the working tree: tracked files and untracked,
# unignored ones are compared before and after each command.
#
# Usage: scripts/readme-commands.sh [README.md ...]   (default: both READMEs and docs/BENCHMARKS.md)
# READMECMD_CHECK_ONLY=1 checks every command and runs none (a quick look,
# e.g. against another target directory; not what CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
timeout_s=${READMECMD_TIMEOUT:-1800}
MARKER='[slow]'

readmes=("$@")
if [ ${#readmes[@]} -eq 0 ]; then
    readmes=(README.md filterstore-datafusion/README.md docs/BENCHMARKS.md)
fi

# The stand-ins a check runs cargo with, in a directory of their own.
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
cat >"$tools/rustc-wrapper" <<'EOF'
#!/usr/bin/env bash
# RUSTC_WRAPPER of a check: probes pass through; a compilation is recorded
# (crate name and its first source path) and refused.
name=""
src=""
prev=""
for a in "$@"; do
    [ "$prev" = "--crate-name" ] && name=$a
    case "$a" in *.rs) [ -z "$src" ] && src=$a ;; esac
    prev=$a
done
if [ -z "$name" ] || [ "$name" = "___" ]; then
    exec "$@"
fi
echo "compile $name $src" >>"$READMECMD_RECORD"
echo "readme-commands: check: would compile $name" >&2
exit 1
EOF
cat >"$tools/rustdoc" <<'EOF'
#!/usr/bin/env bash
# RUSTDOC of a check: version probes pass through; documentation and doc
# tests are recorded and skipped.
for a in "$@"; do
    case "$a" in -vV | -V | --version | --print*) exec "$READMECMD_RUSTDOC" "$@" ;; esac
done
echo "rustdoc" >>"$READMECMD_RECORD"
exit 0
EOF
cat >"$tools/runner" <<'EOF'
#!/usr/bin/env bash
# The target runner of a check: records what cargo would run, runs nothing.
echo "run $1" >>"$READMECMD_RECORD"
exit 0
EOF
chmod +x "$tools/rustc-wrapper" "$tools/rustdoc" "$tools/runner"
host=$(rustc -vV | sed -n 's/^host: //p')
runner_var="CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUNNER"
real_rustdoc=$(command -v rustdoc)

# The fenced ```sh blocks of $1, one command per line (continuations joined).
commands_of() {
    awk '
        /^```sh[[:space:]]*$/ { inside = 1; next }
        /^```/ { inside = 0; next }
        inside {
            line = $0
            if (sub(/\\[[:space:]]*$/, "", line)) { acc = acc line " "; next }
            print acc line
            acc = ""
        }
    ' "$1"
}

# The command word of a line: the first word after VAR=value assignments.
command_word() {
    local w words
    read -ra words <<<"$1"
    for w in "${words[@]}"; do
        case "$w" in
            *=*) continue ;;
            *) echo "$w"; return ;;
        esac
    done
}

tree_state() {
    git -C "$root" status --porcelain=v1 --untracked-files=all
}

failures=0
fail() {
    echo "FAILED: $*" >&2
    failures=$((failures + 1))
}

# Checks `$2` in directory `$1` (see the header). Sets `would_compile` to
# the crates outside the workspace that cargo would compile. Returns 1 when
# cargo refused the command before compiling or running anything.
check() {
    local dir=$1 cmd=$2 record out rc=0
    record=$(mktemp)
    out=$(cd "$dir" && env READMECMD_RECORD="$record" READMECMD_RUSTDOC="$real_rustdoc" \
        RUSTC_WRAPPER="$tools/rustc-wrapper" RUSTDOC="$tools/rustdoc" \
        "$runner_var=$tools/runner" bash -c "$cmd" 2>&1) || rc=$?
    # Workspace crates compile from paths inside the repository (cargo
    # passes them relative to it); dependencies from absolute paths outside.
    would_compile=$(awk -v root="$root/" '$1 == "compile" && index($3, "/") == 1 && index($3, root) != 1 { print $2 }' "$record" | sort -u | tr '\n' ' ')
    local reached summary
    reached=$(wc -l <"$record")
    summary=$(awk '{ print $1 }' "$record" | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
    rm -f "$record"
    if [ "$rc" -ne 0 ] && [ "$reached" -eq 0 ]; then
        echo "$out" | tail -20 >&2
        return 1
    fi
    echo "   accepted by cargo (exit $rc; ${summary:-nothing to compile or run})"
    return 0
}

for readme in "${readmes[@]}"; do
    dir=$root/$(dirname "$readme")
    echo "== $readme (commands run from $(dirname "$readme")/)"
    while IFS= read -r line; do
        cmd=$(echo "$line" | sed 's/^[[:space:]]*//')
        [ -z "$cmd" ] && continue
        case "$cmd" in \#*) continue ;; esac
        if [ "$(command_word "$cmd")" != cargo ]; then
            echo "-- not a cargo command, not run: $cmd"
            continue
        fi
        before=$(tree_state)
        comment=""
        case "$cmd" in *\#*) comment=${cmd#*#} ;; esac
        slow=no
        case "$comment" in *"$MARKER"*) slow=yes ;; esac
        [ "${READMECMD_CHECK_ONLY:-0}" = 1 ] && slow=yes
        datafusion=no
        [ "$readme" != "${readme#filterstore-datafusion/}" ] && datafusion=yes
        if [ $slow = yes ] || [ $datafusion = yes ]; then
            echo "-- check: $cmd"
            if ! check "$dir" "$cmd"; then
                fail "$readme: cargo refused: $cmd"
                continue
            fi
            if [ $datafusion = yes ] && [ -n "$would_compile" ]; then
                fail "$readme: would rebuild dependencies (another feature configuration than .ci/run's build): ${would_compile}for: $cmd"
                continue
            fi
        fi
        if [ $slow = no ]; then
            echo "-- run: $cmd"
            start=$(date +%s)
            if ! (cd "$dir" && timeout --foreground "$timeout_s" bash -c "$cmd"); then
                fail "$readme: exit status not 0: $cmd"
            fi
            echo "   $(($(date +%s) - start)) s"
        fi
        after=$(tree_state)
        if [ "$before" != "$after" ]; then
            fail "$readme: changed the working tree: $cmd"
            diff <(echo "$before") <(echo "$after") >&2 || true
        fi
    done < <(commands_of "$root/$readme")
done

if [ "$failures" -ne 0 ]; then
    echo "readme-commands: $failures command(s) failed" >&2
    exit 1
fi
echo "readme-commands: every README command ran or was accepted"
