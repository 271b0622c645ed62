"""Settings, read once from ``BENCHWATCH_*`` environment variables (or a ``.env`` file)."""

from pathlib import Path

from platformdirs import user_data_dir
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_database_url() -> str:
    """SQLite file in the user's data directory: the embedded default."""
    data_dir = Path(user_data_dir("benchwatch", appauthor=False))
    return f"sqlite:///{data_dir / 'benchwatch.db'}"


DEV_PEPPER = "benchwatch-dev-pepper"  # fine for a laptop; production sets its own secret


class Settings(BaseSettings):
    """Everything configurable about a benchwatch deployment."""

    model_config = SettingsConfigDict(env_prefix="BENCHWATCH_", env_file=".env", extra="ignore")

    DATABASE_URL: str = Field(default_factory=default_database_url)
    BROKER_URL: str | None = None  # None: background work runs in process
    PUBLIC_READ: bool = True  # False: every read needs a token (any scope)
    TOKEN_PEPPER: SecretStr = SecretStr(DEV_PEPPER)
    MAX_BODY_BYTES: int = 64 * 1024 * 1024  # larger request bodies get 413
    LOG_LEVEL: str = "INFO"
    # Detector thresholds per suite or metric, e.g. {"metric:dynamo_peak_mem":
    # {"min_rel_change": 0.2}, "suite:timm_models": {"max_p_value": 0.0001}} (JSON in the env).
    DETECTOR_THRESHOLDS: dict[str, dict[str, float]] = Field(default_factory=dict)


settings = Settings()
