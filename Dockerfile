# The monitor as a container: Python 3.11 plus a Java 17 runtime for the embedded Spark driver.
# It installs through scripts/install.sh, the install step `make install` and `make bootstrap` (and
# so CI) run: the package (not editable: migrations/, templates/ and alert_rules/ travel inside it),
# then the pinned PostgreSQL JDBC driver, fetched over HTTPS at build time and checked by its
# SHA-256 (`kafka-health setup`), into KAFKA_HEALTH_CACHE where the daemon finds it. No Maven.
# Runs as the non-root user 10001, which the Helm chart (deploy/helm/kafka-health) runs it as, on
# a read-only root filesystem: it writes only KAFKA_HEALTH_VAR and /tmp.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 kafka-health \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/kafka-health --create-home kafka-health
ENV KAFKA_HEALTH_CACHE=/opt/kafka-health/cache \
    KAFKA_HEALTH_VAR=/var/lib/kafka-health
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY scripts ./scripts
COPY monitor ./monitor
COPY migrations ./migrations
COPY alert_rules ./alert_rules
COPY templates ./templates
COPY queries ./queries
COPY deploy ./deploy
RUN bash scripts/install.sh packages && bash scripts/install.sh runtime --image
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"
ENTRYPOINT ["kafka-health"]
CMD ["run", "--config", "/etc/kafka-health/monitor.yaml"]
