"""Alembic's environment for the queue: migrations run on the connection `schema.migrate` hands over, in its
transaction."""

from alembic import context

from recoe_causaldiag.leaderboard.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
