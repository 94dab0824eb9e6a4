"""Alembic environment for the packaged migrations.

Used programmatically: ``RunStore.migrate()`` passes its open connection in
``config.attributes["connection"]``. Without one (a developer running Alembic
by hand), ``sqlalchemy.url`` from the config is used.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from bot.store.engine import create_engine
from bot.store.schema import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rebuilds tables instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("pass a connection in config.attributes or set sqlalchemy.url")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            _configure(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
