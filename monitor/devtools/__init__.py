"""The embedded development stack: a local Kafka cluster, PostgreSQL and the downloads they need.

Nothing here is used against production clusters; `kafka-health run` with a configured
`DATABASE_URL` and clusters never starts any of it.
"""
