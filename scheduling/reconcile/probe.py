"""Cluster probe (placeholder)."""


def probe_all() -> None:
    """Probe every cluster; not implemented yet."""
