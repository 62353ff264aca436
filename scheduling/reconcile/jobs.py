"""Job reconcile (placeholder until the backends land)."""


def reconcile_job_task(task, job_id: int) -> None:
    """Reconcile one job; not implemented yet."""


def reconcile_many(job_ids: list[int]) -> None:
    """Reconcile several jobs; not implemented yet."""
