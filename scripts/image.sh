#!/usr/bin/env bash
# `make image`: builds the container image (Dockerfile) with docker or podman, the first that is
# installed and answers; says so and exits 1 where neither does. IMAGE names the tag
# (default kafka-health:<version in pyproject.toml>); CONTAINER_ENGINE picks one engine.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n1)
tag="${IMAGE:-kafka-health:${version:-latest}}"
unusable=()
for engine in ${CONTAINER_ENGINE:-docker podman}; do
  command -v "$engine" >/dev/null 2>&1 || continue
  if ! timeout 30 "$engine" info >/dev/null 2>&1; then
    unusable+=("$engine is installed but does not answer (\`$engine info\` failed: is its daemon or service running?)")
    continue
  fi
  echo ">> building $tag with $engine"
  exec "$engine" build --tag "$tag" --file Dockerfile .
done

echo "error: make image needs a container engine, and none is usable here:" >&2
if [ "${#unusable[@]}" -gt 0 ]; then
  printf '  %s\n' "${unusable[@]}" >&2
else
  echo "  not installed: ${CONTAINER_ENGINE:-docker podman}" >&2
fi
echo "install one (Debian: apt-get install podman, or Docker Engine) or start the one installed, then run make image again" >&2
exit 1
