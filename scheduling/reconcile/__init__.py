"""Reconcile one job, queue or cluster: read, diff, act; status and conditions written once per pass."""
