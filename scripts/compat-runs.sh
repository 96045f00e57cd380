#!/usr/bin/env bash
# The Kafka version matrix: the contract suite and the end-to-end run (COMPAT_TESTS) once per
# Kafka version given, each version in a pytest session of its own with a fresh dev cluster of
# that version. COMPAT_JOBS (default 1) versions run at once: each slot has its own state
# directory (var/compat/<version>) and its own ports, slot n at the test ports minus 1000 * n
# (Kafka) and plus n (PostgreSQL), all below the kernel's ephemeral range (32768 up), where a
# client connection of another session could be holding the port. Each session's
# output is printed whole when it ends; the first failure fails the script.
#
#   usage: scripts/compat-runs.sh PYTEST VERSION... (PYTEST_ARGS are passed on)
set -uo pipefail

pytest=$1
shift
jobs=${COMPAT_JOBS:-1}
var=${KAFKA_HEALTH_VAR:-var}
kafka_port=${KAFKA_HEALTH_TEST_KAFKA_PORT:-29092}
pg_port=${KAFKA_HEALTH_TEST_PG_PORT:-24433}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# PYTEST_ARGS split as a shell splits words, quotes kept (`-k "a and b"` is two arguments), not run.
mapfile -d '' -t pytest_args < <("$(dirname "$pytest")/python" -c \
    'import os, shlex, sys; sys.stdout.write("\0".join(shlex.split(os.environ.get("PYTEST_ARGS", ""))))')

run_one() { # slot version
    local slot=$1 version=$2
    KAFKA_HEALTH_TEST_KAFKA_VERSION=$version \
    KAFKA_HEALTH_VAR="$var/compat/$version" \
    KAFKA_HEALTH_TEST_KAFKA_PORT=$((kafka_port - 1000 * slot)) \
    KAFKA_HEALTH_TEST_PG_PORT=$((pg_port + slot)) \
        "$pytest" tests/contract tests/integration/test_compat_e2e.py -m integration "${pytest_args[@]}" \
        >"$logs/$version.log" 2>&1
}

versions=("$@")
failed=0
# The broker jars first, one version after the other: parallel mvn runs share ~/.m2.
for version in "${versions[@]}"; do
    "$(dirname "$pytest")/kafka-health" dev-cluster install --version "$version" >/dev/null || exit 1
done
for ((start = 0; start < ${#versions[@]}; start += jobs)); do
    pids=()
    batch=("${versions[@]:start:jobs}")
    for slot in "${!batch[@]}"; do
        echo ">> Apache Kafka ${batch[$slot]}: the contract suite and the end-to-end run"
        run_one "$slot" "${batch[$slot]}" &
        pids+=($!)
    done
    for slot in "${!batch[@]}"; do
        if ! wait "${pids[$slot]}"; then
            failed=1
        fi
        echo ">> Apache Kafka ${batch[$slot]}:"
        cat "$logs/${batch[$slot]}.log"
    done
    [ "$failed" = 0 ] || exit 1
done
