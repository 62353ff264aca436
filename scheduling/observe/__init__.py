"""Per-phase observability: pure functions that turn what the cluster says into a job's phase, timeline entries,
"why pending" explanation, events and metrics.

Everything here except `metrics` is pure: inputs are Kubernetes objects as camelCase dicts (what the API server
returns, or `ApiClient.sanitize_for_serialization`), outputs are plain data. `scheduling.reconcile.status` writes
the results to the database.
"""
