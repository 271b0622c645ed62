"""Initial schema: catalog, runs, results and API tokens.

Revision ID: 8783272ee5a6
Revises:
Create Date: 2026-11-29 17:48:43.883540
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8783272ee5a6"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_token_token_hash")),
    )
    op.create_table(
        "compiler_config",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compiler_config")),
        sa.UniqueConstraint("name", name=op.f("uq_compiler_config_name")),
    )
    op.create_table(
        "environment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("torch", sa.String(length=128), nullable=False),
        sa.Column("torch_git_sha", sa.String(length=64), nullable=False),
        sa.Column("triton", sa.String(length=128), nullable=False),
        sa.Column("python", sa.String(length=64), nullable=False),
        sa.Column("cuda", sa.String(length=64), nullable=False),
        sa.Column("hip", sa.String(length=64), nullable=False),
        sa.Column("driver", sa.String(length=128), nullable=False),
        sa.Column("packages", sa.JSON(), nullable=False),
        sa.Column("compiler_options", sa.JSON(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environment")),
        sa.UniqueConstraint("content_hash", name=op.f("uq_environment_content_hash")),
    )
    with op.batch_alter_table("environment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_environment_channel"), ["channel"], unique=False)

    op.create_table(
        "machine",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("arch", sa.String(length=256), nullable=False),
        sa.Column("arch_short", sa.String(length=64), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=True),
        sa.Column("gpu_memory_gb", sa.Float(), nullable=True),
        sa.Column("cpu", sa.String(length=256), nullable=False),
        sa.Column("cpu_count", sa.Integer(), nullable=True),
        sa.Column("host_memory_gb", sa.Float(), nullable=True),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machine")),
        sa.UniqueConstraint("name", name=op.f("uq_machine_name")),
    )
    op.create_table(
        "metric",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("higher_is_better", sa.Boolean(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric")),
        sa.UniqueConstraint("name", name=op.f("uq_metric_name")),
    )
    op.create_table(
        "benchmark",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("precision", sa.String(length=16), nullable=False),
        sa.Column("compiler_config_id", sa.Integer(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["compiler_config_id"],
            ["compiler_config.id"],
            name=op.f("fk_benchmark_compiler_config_id_compiler_config"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmark")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_benchmark_fingerprint")),
    )
    with op.batch_alter_table("benchmark", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_benchmark_model"), ["model"], unique=False)
        batch_op.create_index(batch_op.f("ix_benchmark_suite"), ["suite"], unique=False)

    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("payload_hash", sa.String(length=64), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("tier", sa.String(length=32), nullable=False),
        sa.Column("commit", sa.String(length=64), nullable=False),
        sa.Column("branch", sa.String(length=256), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("hostname", sa.String(length=256), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cases_attempted", sa.Integer(), nullable=False),
        sa.Column("cases_passed", sa.Integer(), nullable=False),
        sa.Column("cases_failed", sa.Integer(), nullable=False),
        sa.Column("cases_skipped", sa.Integer(), nullable=False),
        sa.Column("result_count", sa.Integer(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environment.id"], name=op.f("fk_run_environment_id_environment")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_run_machine_id_machine")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
        sa.UniqueConstraint("key", name=op.f("uq_run_key")),
    )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_channel"), ["channel"], unique=False)
        batch_op.create_index(batch_op.f("ix_run_environment_id"), ["environment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_run_machine_id"), ["machine_id"], unique=False)
        batch_op.create_index("ix_run_started_at_id", ["started_at", "id"], unique=False)

    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("metric_id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"], ["benchmark.id"], name=op.f("fk_series_benchmark_id_benchmark")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_series_machine_id_machine")
        ),
        sa.ForeignKeyConstraint(
            ["metric_id"], ["metric.id"], name=op.f("fk_series_metric_id_metric")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_series")),
        sa.UniqueConstraint(
            "benchmark_id",
            "metric_id",
            "machine_id",
            "channel",
            name=op.f("uq_series_benchmark_id_metric_id_machine_id_channel"),
        ),
    )
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_series_benchmark_id"), ["benchmark_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_series_machine_id"), ["machine_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_series_metric_id"), ["metric_id"], unique=False)

    op.create_table(
        "result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=True),
        sa.Column("text_value", sa.String(length=256), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result")),
        sa.UniqueConstraint("run_id", "series_id", name=op.f("uq_result_run_id_series_id")),
    )
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.create_index(
            "ix_result_series_id_measured_at", ["series_id", "measured_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_index("ix_result_series_id_measured_at")

    op.drop_table("result")
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_series_metric_id"))
        batch_op.drop_index(batch_op.f("ix_series_machine_id"))
        batch_op.drop_index(batch_op.f("ix_series_benchmark_id"))

    op.drop_table("series")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index("ix_run_started_at_id")
        batch_op.drop_index(batch_op.f("ix_run_machine_id"))
        batch_op.drop_index(batch_op.f("ix_run_environment_id"))
        batch_op.drop_index(batch_op.f("ix_run_channel"))

    op.drop_table("run")
    with op.batch_alter_table("benchmark", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_benchmark_suite"))
        batch_op.drop_index(batch_op.f("ix_benchmark_model"))

    op.drop_table("benchmark")
    op.drop_table("metric")
    op.drop_table("machine")
    with op.batch_alter_table("environment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_environment_channel"))

    op.drop_table("environment")
    op.drop_table("compiler_config")
    op.drop_table("api_token")
