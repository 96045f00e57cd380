#!/usr/bin/env bash
# `make test`: the suite's shards (scripts/test-shards.sh) and the Kafka version matrix CI adds
# (scripts/compat-runs.sh, COMPAT_VERSIONS) side by side. The shards leave a third of the two
# CPUs idle on average (they wait on brokers, evaluations and real traffic); the matrix's two
# versions, five minutes each, run in that time instead of after the shards. Their ports lie
# between the shards' (compat-runs.sh). The matrix's output is printed after the shards'; any
# failure fails the script.
#
#   usage: scripts/test-all.sh PYTEST [PYTEST ARGS FOR THE SHARDS...]
#   (COMPAT_VERSIONS: the versions, none to skip the matrix; COMPAT_JOBS and PYTEST_ARGS as in
#   compat-runs.sh)
set -uo pipefail

pytest=$1
shift
here=$(dirname "$0")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

compat=
if [ -n "${COMPAT_VERSIONS:-}" ]; then
    # shellcheck disable=SC2086 # the versions are words
    bash "$here/compat-runs.sh" "$pytest" $COMPAT_VERSIONS >"$log" 2>&1 &
    compat=$!
fi
bash "$here/test-shards.sh" "$pytest" "$@"
failed=$?
if [ -n "$compat" ]; then
    wait "$compat" || failed=1
    cat "$log"
fi
exit "$failed"
