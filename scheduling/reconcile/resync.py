"""Cluster resync (placeholder until the backends land)."""


def resync_all() -> None:
    """Resync every cluster; not implemented yet."""
