"""Alembic environment: batch mode (SQLite), type comparison, URL from the caller or settings."""

from alembic import context
from sqlalchemy import Connection

from app.core.config import settings
from app.core.db import make_engine
from app.models import Base

config = context.config
target_metadata = Base.metadata


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or settings.DATABASE_URL
    engine = make_engine(url)
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            run_without_foreign_keys(conn)
        else:
            run_with(conn)
    engine.dispose()


def run_without_foreign_keys(connection: Connection) -> None:
    """SQLite: a batch migration drops and recreates a table that others may reference.

    With foreign keys enforced, dropping ``alert_group`` while ``regression`` rows point at it
    fails (data present). SQLite's own recipe for table changes: enforcement off outside the
    transaction, then a foreign key check of the result before it is on again.
    """
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    connection.commit()
    run_with(connection)
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    connection.exec_driver_sql("PRAGMA foreign_keys=ON")
    connection.commit()
    if broken:
        raise RuntimeError(f"the migration left rows that break foreign keys: {broken[:5]}")


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or settings.DATABASE_URL,
        target_metadata=target_metadata,
        render_as_batch=True,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
