"""Expose stage: the read side, read-only on everything it shows.

- `read/`: typed read-only functions over the SQL views (the read layer), shared by the pages, the
  JSON API and the CLI reports;
- `metrics/`: the Prometheus exposition and the catalogue of every metric it serves;
- `web/`: the FastAPI application: dashboard pages, the JSON API, the Burrow-compatible API,
  identity and the web server. Changes go only through `act` and `alert`.

`web/` sits above `read/` and `metrics/` (an import-linter contract in `pyproject.toml`).
"""
