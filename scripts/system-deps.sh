#!/usr/bin/env bash
# Makes sure the system tools the project runs on are present: Python >= 3.11, Java >= 17,
# Maven (fetches Kafka and the JDBC driver from Maven Central), Go (builds Helm for the chart's
# test), the PostgreSQL server, and
# Debian's Chromium (the browser tests drive /usr/bin/chromium; nothing downloads a browser),
# Debian's Prometheus (with promtool) and Alertmanager (the push, Alertmanager receiver and
# exported rules tests).
# Idempotent and quick when everything is there. As root on Debian/Ubuntu it installs what is
# missing with apt-get; otherwise it says what to install and exits non-zero.
set -euo pipefail

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

py_ok=0
if have "${PYTHON:-python3}"; then
  "${PYTHON:-python3}" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' && py_ok=1
fi
[ "$py_ok" = 1 ] || missing+=(python3 python3-venv)

java_ok=0
if have java; then
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ "${major:-0}" -ge 17 ] && java_ok=1
fi
[ "$java_ok" = 1 ] || missing+=(openjdk-17-jre-headless)

have mvn || missing+=(maven)
# The Helm chart's test builds the pinned Helm from the Go module proxy (monitor/devtools/helm.py).
have go || [ -x /usr/local/go/bin/go ] || missing+=(golang-go)
# The retention button keeps its config-as-code repository with git (through GitPython).
have git || missing+=(git)

pg_ok=0
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && pg_ok=1; done
if [ "$pg_ok" = 0 ] && have pg_config && [ -x "$(pg_config --bindir)/initdb" ]; then pg_ok=1; fi
# With DATABASE_URL set, the project never starts its own PostgreSQL.
[ -n "${DATABASE_URL:-}" ] && pg_ok=1
[ "$pg_ok" = 1 ] || missing+=(postgresql)
# psql runs the queries/ catalogue as documented (tests/integration/test_queries_catalogue.py).
pg_client_ok=0
have psql && pg_client_ok=1
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/psql" ] && pg_client_ok=1; done
[ "$pg_client_ok" = 1 ] || missing+=(postgresql-client)

# Push and Alertmanager integrations are tested against Debian's real servers; the exported
# Prometheus rules are checked with the same package's promtool.
if ! have prometheus || ! have promtool; then missing+=(prometheus); fi
have prometheus-alertmanager || missing+=(prometheus-alertmanager)

# The web pages are tested in a real headless browser: Debian's package, with its fonts.
have chromium || missing+=(chromium fonts-dejavu-core)

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" = 0 ] && have apt-get; then
  echo ">> installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  }
  exit 0
fi

echo "error: missing system packages: ${missing[*]}" >&2
echo "install them (Debian/Ubuntu: sudo apt-get install ${missing[*]}), or set DATABASE_URL" >&2
echo "to use an existing PostgreSQL instead of a local one" >&2
echo "(chromium is needed by the browser tests only: pytest -m 'not browser' runs without it)" >&2
exit 1
