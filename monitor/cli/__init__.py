"""The `kafka-health` command line: `main` builds it from one module per command group; `common`
holds what every command shares (settings loading, the database engine, printing errors)."""
