"""The files the package ships and reads at run time, found through `monitor.core.resources`.

`templates/`, `alert_rules/` and `migrations/` here are links to the top-level folders of the
checkout, where they are edited; a wheel holds copies of them (pyproject.toml's package data).
"""
