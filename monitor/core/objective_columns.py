"""The `lag_objective` entity's columns (name, Spark type, meaning), but the `sampled` every entity
has: `monitor.core.derived` builds the entity's contract from them. Apart from
`monitor.core.objectives` (which reads the objectives file) so that the contract imports nothing
of the settings."""

from __future__ import annotations

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("objective", "string", "the lag objective's name (objectives file)"),
    ("group_id", "string", "consumer group the objective applies to"),
    ("lag_threshold_seconds", "double", "the objective's lag_seconds: a minute is bad above it"),
    ("target", "double", "percent of the minutes that must be good"),
    ("window_days", "int", "days the target and the error budget are counted over"),
    ("max_lag_seconds", "double", "the group's largest partition lag in seconds now"),
    (
        "minute_bad",
        "boolean",
        "this minute is bad: an evaluation in it saw max_lag_seconds above lag_threshold_seconds; "
        "null when the group's lag is not known",
    ),
    *(
        (window, "double", f"bad-minute fraction over the last {span} / the budget fraction (1 - target); "
         "1 spends the budget exactly over window_days; null before any minute is recorded")
        for window, span in (
            ("burn_rate_5m", "5 minutes"), ("burn_rate_30m", "30 minutes"), ("burn_rate_1h", "hour"),
            ("burn_rate_6h", "6 hours"), ("burn_rate_3d", "3 days"),
        )
    ),
    ("bad_minutes", "bigint", "bad minutes over the last window_days"),
    ("recorded_minutes", "bigint", "minutes with a known lag over the last window_days"),
    (
        "budget_remaining",
        "double",
        "fraction of the error budget (window_days of minutes x (1 - target)) not spent by bad_minutes: "
        "1 untouched, 0 spent, negative overspent",
    ),
    ("compliance", "double", "percent of the recorded minutes over window_days that were good"),
)  # fmt: skip
