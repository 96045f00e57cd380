#!/usr/bin/env bash
# Installs kafka-health: the one install step of the Makefile (`make install` and `make bootstrap`,
# which `make test` and so CI run) and of the Dockerfile (which docker-compose.yml builds).
#
#   scripts/install.sh packages [--venv DIR] [--dev]
#       the project and its Python dependencies: into the virtualenv DIR (made if missing),
#       editable and with the development tools with --dev (make install); else into the current
#       Python, not editable (the image: templates/, alert_rules/ and migrations/ travel inside
#       the package)
#   scripts/install.sh runtime [--venv DIR] [--image]
#       what the daemon runs with, fetched once and checked (`kafka-health setup`): the pinned
#       PostgreSQL JDBC driver and, for the development stack (make bootstrap), the Kafka broker
#       jars and the PostgreSQL server; --image fetches the JDBC driver only
set -euo pipefail
cd "$(dirname "$0")/.."

step="${1:-}"
shift || true
venv="" dev=0 image=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --dev) dev=1; shift ;;
    --image) image=1; shift ;;
    *) echo "error: scripts/install.sh: unknown option $1 (see the usage at the top of the file)" >&2; exit 2 ;;
  esac
done

python="${PYTHON:-python3}"
bin=""
if [ -n "$venv" ]; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  python="$venv/bin/python"
  bin="$venv/bin/"
fi

case "$step" in
  packages)
    if [ "$dev" = 1 ]; then
      echo ">> installing Python dependencies into ${venv:-the current Python}"
      "$python" -m pip install -q --upgrade pip
      "$python" -m pip install --progress-bar on -e '.[dev]'
    else
      "$python" -m pip install --no-cache-dir .
    fi
    ;;
  runtime)
    if [ "$image" = 1 ]; then
      "${bin}kafka-health" setup --skip-kafka --skip-postgres
    else
      "${bin}kafka-health" setup
    fi
    ;;
  *)
    echo "error: scripts/install.sh: say what to install: packages or runtime (see the top of the file)" >&2
    exit 2
    ;;
esac
