"""Bulk helpers: custom plans last for the transaction that asked for them, and no longer."""

from sqlalchemy.orm import Session

from app.core.bulk import plan_for_parameters
from app.core.db import Database


def plan_cache_mode(session: Session) -> str | None:
    mode: str | None = session.connection().exec_driver_sql("SHOW plan_cache_mode").scalar()
    return mode


def test_custom_plans_last_until_the_transaction_ends(postgres_database: Database) -> None:
    with postgres_database.sessionmaker() as session:
        assert plan_cache_mode(session) == "auto"
        plan_for_parameters(session)
        assert plan_cache_mode(session) == "force_custom_plan"
        session.commit()
        assert plan_cache_mode(session) == "auto"  # the pooled connection is not changed


def test_custom_plans_are_a_no_op_elsewhere(database: Database) -> None:
    with database.sessionmaker() as session:
        plan_for_parameters(session)  # SQLite has no plan cache setting; nothing is sent
        session.commit()
