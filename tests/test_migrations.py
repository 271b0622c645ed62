"""Migrations build exactly the models' schema on both dialects, and go down and up again."""

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from app.core.db import Base, Database
from app.core.migrate import is_up_to_date, upgrade_database


def test_schema_matches_models(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    assert is_up_to_date(database.engine)


def test_down_and_up_again(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/cycle.db"
    upgrade_database(url)
    from alembic import command

    from app.core.migrate import alembic_config

    command.downgrade(alembic_config(url), "base")
    engine = create_engine(url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    assert not is_up_to_date(engine)
    upgrade_database(url)
    assert is_up_to_date(engine)
    engine.dispose()
