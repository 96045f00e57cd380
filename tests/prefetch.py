"""Fetch, one after the other, what test sessions otherwise fetch on first use: the share-group
cluster's Kafka jars and the OpenID provider's. Test sessions that run side by side
(scripts/test-shards.sh) would otherwise run `mvn` at the same time on one ~/.m2.

    usage: python -m tests.prefetch
"""

from __future__ import annotations

from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.oidc_provider import DevOidcProvider
from monitor.devtools.paths import cache_dir, var_dir
from tests.fixtures.share import share_cluster_config


def main() -> None:
    scratch = var_dir() / "test" / "prefetch"
    DevKafkaCluster(share_cluster_config(), scratch / "kafka-share", cache_dir()).ensure_jars(lambda _: None)
    DevOidcProvider(scratch / "oidc", cache_dir(), 0).ensure_jars()
    print(f"fetched: Kafka jars for the share-group cluster, the OpenID provider ({cache_dir()})")


if __name__ == "__main__":
    main()
