# The monitor as a container: Python 3.11 plus a Java 17 runtime for the embedded Spark driver.
# No Maven: `kafka-health setup` fetches the pinned PostgreSQL JDBC driver over HTTPS at build time
# (checked by its SHA-256) into KAFKA_HEALTH_CACHE, where the daemon finds it.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/kafka-health --create-home kafka-health
ENV KAFKA_HEALTH_CACHE=/opt/kafka-health/cache \
    KAFKA_HEALTH_VAR=/var/lib/kafka-health
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY monitor ./monitor
COPY migrations ./migrations
COPY alert_rules ./alert_rules
COPY templates ./templates
COPY queries ./queries
COPY deploy ./deploy
# Not editable: migrations/, templates/ and alert_rules/ travel inside the package (monitor/resources/).
RUN pip install --no-cache-dir . && kafka-health setup --skip-kafka --skip-postgres
USER kafka-health
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"
ENTRYPOINT ["kafka-health"]
CMD ["run", "--config", "/etc/kafka-health/monitor.yaml"]
