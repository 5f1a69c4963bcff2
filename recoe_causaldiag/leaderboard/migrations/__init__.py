"""Alembic migrations of the queue's schema (`schema.metadata`): one revision per change, applied by
`schema.migrate` whenever a queue is opened. A new change is a new file in `versions/` (`alembic revision`
with this folder as `script_location`), tested by upgrading a database made by the previous revision."""
