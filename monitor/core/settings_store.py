"""The `database` section of the settings: where PostgreSQL is and how long each kind of history
is kept (monitor.store.service.Store.maintain drops what is past it)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator, model_validator

from monitor.core.settings_base import Strict

DEFAULT_DEV_POSTGRES_PORT = 55432


class DatabaseConfig(Strict):
    url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+psycopg://...). Unset: the project-local PostgreSQL.",
    )
    sample_retention_days: int = Field(
        default=7, ge=1, le=3650, description="Days of raw samples and evaluations kept."
    )
    rollup_15m_retention_days: int = Field(
        default=30, ge=1, le=3650, description="Days of the lag history's 15-minute rollups kept."
    )
    rollup_1h_retention_days: int = Field(
        default=400, ge=1, le=3650, description="Days of the lag history's hourly rollups kept."
    )
    history_retention_days: int = Field(
        default=400,
        ge=1,
        le=3650,
        description=(
            "Days of what is over kept: resolved findings and alerts, closed incidents and their "
            "acknowledgements, delivered or given-up notifications and their log, ended silences, "
            "notices and data-loss events. What is still open is always kept."
        ),
    )
    partitions_ahead_days: int = Field(default=3, ge=1, le=60)
    local_port: int = Field(default=DEFAULT_DEV_POSTGRES_PORT, gt=0, lt=65536)

    @field_validator("url")
    @classmethod
    def _postgres_only(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql", "postgres://")):
            raise ValueError(
                "database.url must be a PostgreSQL URL such as "
                "postgresql+psycopg://user:password@host:5432/dbname"
            )
        return value

    @model_validator(mode="after")
    def _coarser_keeps_longer(self) -> DatabaseConfig:
        pairs = (
            ("rollup_15m_retention_days", "sample_retention_days"),
            ("rollup_1h_retention_days", "rollup_15m_retention_days"),
        )
        for longer, shorter in pairs:
            if getattr(self, longer) < getattr(self, shorter):
                raise ValueError(
                    f"{longer} ({getattr(self, longer)}) is shorter than {shorter} "
                    f"({getattr(self, shorter)}): a coarser history must be kept at least as long as "
                    f"the finer one it summarises; raise {longer} to {getattr(self, shorter)} or more"
                )
        return self
