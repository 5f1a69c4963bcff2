"""The leaderboard behind the Space: a durable job queue (SQLite or PostgreSQL, `queue`), submission checks
(`validation`), workers (`worker`), the metric sandbox, the board computed from stored per-pair scores (`board`)
and the deployment's actions (`service`). Import the submodules; this package itself stays light, so that a
process touching only the queue does not load the models."""
