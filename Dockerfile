# The monitor as a container: Python 3.11 plus a Java 17 runtime for the embedded Spark driver.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
 && rm -rf /var/lib/apt/lists/*
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
EXPOSE 8080
ENTRYPOINT ["kafka-health"]
CMD ["run", "--config", "/etc/kafka-health/monitor.yaml"]
