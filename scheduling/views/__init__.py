"""Dashboard views, one module per page family. Server-rendered; htmx polls fragments of the live parts."""
from .clusters import cluster_create, cluster_detail, cluster_list, cluster_schedulers, cluster_test
from .jobs import job_cancel, job_detail, job_events, job_list, job_live, job_logs, job_objects, job_resubmit
from .jobs_cancel import jobs_cancel
from .overview import overview
from .queue_usage import queue_usage
from .queues import queue_children, queue_create, queue_detail, queue_tree
from .runtime_templates import (
    template_create,
    template_detail,
    template_edit,
    template_list,
    template_preview,
    template_retire,
)
from .submit import submit
from .webhooks import webhook_list, webhook_test

__all__ = [
    "cluster_create", "cluster_detail", "cluster_list", "cluster_schedulers", "cluster_test", "job_cancel",
    "job_detail",
    "job_events", "job_logs",
    "job_list", "job_objects",
    "job_live", "job_resubmit", "jobs_cancel",
    "overview", "queue_children", "queue_create", "queue_detail", "queue_tree", "queue_usage", "submit",
    "template_create", "template_detail", "template_edit", "template_list", "template_preview", "template_retire",
    "webhook_list", "webhook_test",
]
