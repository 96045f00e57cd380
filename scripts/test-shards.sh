#!/usr/bin/env bash
# The whole suite as TEST_SHARDS pytest sessions side by side (`make test`'s default: 2; 1 runs the
# whole suite in one session; tests/shards.py: whole modules, balanced by tests/durations.json).
# Beside others, each session has its own state directory (var/shards/<k>) and its own ports:
# shard k at the test ports minus 2000 * (k - 1) (Kafka, which moves its OpenID provider with it)
# and plus 10 * (k - 1) (PostgreSQL, the soak's PostgreSQL, Spark), all below the kernel's
# ephemeral range; the compat slots (scripts/compat-runs.sh) use the ports in between and run
# after these. Each session's output is printed whole when it ends. The JUnit report of shard k
# is var/test-report-<k>.xml. Any failure fails the script.
#
#   usage: scripts/test-shards.sh PYTEST [PYTEST ARGS...]
set -uo pipefail

pytest=$1
shift
shards=${TEST_SHARDS:-2}
var=${KAFKA_HEALTH_VAR:-var}
mkdir -p "$var"

if [ "$shards" -le 1 ]; then
    exec "$pytest" --junitxml="$var/test-report-1.xml" "$@"
fi

kafka_port=${KAFKA_HEALTH_TEST_KAFKA_PORT:-29092}
pg_port=${KAFKA_HEALTH_TEST_PG_PORT:-24433}
soak_pg_port=${KAFKA_HEALTH_TEST_SOAK_PG_PORT:-24533}
spark_port=${KAFKA_HEALTH_TEST_SPARK_PORT:-27077}
# The soak runs at the end of its shard only when it fits in the shard's share of CI's 45
# minutes (the version matrix and the lint take the rest).
export KAFKA_HEALTH_TEST_BUDGET_MINUTES=${KAFKA_HEALTH_TEST_BUDGET_MINUTES:-34}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_one() { # k (1-based), then pytest's arguments
    local k=$1 slot=$(($1 - 1))
    shift
    local oidc=()
    if [ -n "${KAFKA_HEALTH_TEST_OIDC_PORT:-}" ]; then
        oidc=(KAFKA_HEALTH_TEST_OIDC_PORT=$((KAFKA_HEALTH_TEST_OIDC_PORT - 2000 * slot)))
    fi
    env "${oidc[@]}" \
        KAFKA_HEALTH_VAR="$var/shards/$k" \
        KAFKA_HEALTH_TEST_KAFKA_PORT=$((kafka_port - 2000 * slot)) \
        KAFKA_HEALTH_TEST_PG_PORT=$((pg_port + 10 * slot)) \
        KAFKA_HEALTH_TEST_SOAK_PG_PORT=$((soak_pg_port + 10 * slot)) \
        KAFKA_HEALTH_TEST_SPARK_PORT=$((spark_port + 10 * slot)) \
        "$pytest" --shard "$k/$shards" --junitxml="$var/test-report-$k.xml" "$@" \
        >"$logs/$k.log" 2>&1
}

pids=()
for ((k = 1; k <= shards; k++)); do
    run_one "$k" "$@" &
    pids+=($!)
done
failed=0
for ((k = 1; k <= shards; k++)); do
    wait "${pids[$((k - 1))]}"
    rc=$?
    # 5: no test of a narrowed run (PYTEST_ARGS) fell in this shard.
    if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then
        failed=1
    fi
    echo ">> shard $k of $shards:"
    cat "$logs/$k.log"
done
exit "$failed"
