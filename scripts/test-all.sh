#!/usr/bin/env bash
# `make test`: the lint, the whole suite as shards side by side (scripts/test-shards.sh), then the
# Kafka version matrix (scripts/compat-runs.sh) at the versions given.
#
# The suite keeps both cores busy from its first minute to its last, so what does not need them
# runs beside it instead of before or after it: the lint (ruff, mypy and the import contracts:
# most of a minute on a fresh machine, where mypy has no cache yet) and the download of the
# matrix's broker jars (network and disk; one `mvn` at a time, after the test prefetch's, as they
# share ~/.m2). The lint's output is printed as soon as it ends; a lint failure, a failed
# download or a failed test fails the whole.
#
#   usage: scripts/test-all.sh BIN VERSION...   (BIN: the virtualenv's bin; TEST_SHARDS and
#          PYTEST_ARGS are read from the environment as the two scripts read them)
set -uo pipefail

bin=$1
shift
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

make --no-print-directory lint >"$logs/lint.log" 2>&1 &
lint=$!
"$bin/python" -m tests.prefetch || exit 1
(
    for version in "$@"; do
        "$bin/kafka-health" dev-cluster install --version "$version" || exit 1
    done
) >"$logs/jars.log" 2>&1 &
jars=$!

# PYTEST_ARGS split as a shell splits words, quotes kept (`-k "a and b"` is two arguments), not run.
mapfile -d '' -t pytest_args < <("$bin/python" -c \
    'import os, shlex, sys; sys.stdout.write("\0".join(shlex.split(os.environ.get("PYTEST_ARGS", ""))))')
bash scripts/test-shards.sh "$bin/pytest" --durations=25 "${pytest_args[@]}" &
shards=$!

# The lint ends first: its output comes before the shards' (printed when each shard ends).
failed=0
if ! wait "$lint"; then
    failed=1
fi
echo ">> lint:"
cat "$logs/lint.log"
[ "$failed" = 0 ] || echo ">> the lint failed: the tests go on, and the run fails at the end"

wait "$shards" || failed=1
if ! wait "$jars"; then
    echo ">> fetching the broker jars of the version matrix failed:"
    cat "$logs/jars.log"
    exit 1
fi
[ "$failed" = 0 ] || exit 1
COMPAT_JOBS=2 bash scripts/compat-runs.sh "$bin/pytest" "$@"
