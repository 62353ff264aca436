"""Dashboard routes."""
from django.urls import path

from . import views

app_name = "scheduling"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("queues/", views.queue_tree, name="queues"),
    path("queues/new/", views.queue_create, name="queue-new"),
    path("queues/<slug:name>/", views.queue_detail, name="queue"),
    path("queues/<slug:name>/children/", views.queue_children, name="queue-children"),
    path("queues/<slug:name>/usage/", views.queue_usage, name="queue-usage"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/cancel/", views.jobs_cancel, name="jobs-cancel"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/live/", views.job_live, name="job-live"),
    path("jobs/<int:pk>/events/", views.job_events, name="job-events"),
    path("jobs/<int:pk>/logs/", views.job_logs, name="job-logs"),
    path("jobs/<int:pk>/objects/", views.job_objects, name="job-objects"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/resubmit/", views.job_resubmit, name="job-resubmit"),
    path("submit/", views.submit, name="submit"),
    path("templates/", views.template_list, name="templates"),
    path("templates/new/", views.template_create, name="template-new"),
    path("templates/preview/", views.template_preview, name="template-preview"),
    path("templates/<slug:name>/", views.template_detail, name="template"),
    path("templates/<slug:name>/edit/", views.template_edit, name="template-edit"),
    path("templates/<slug:name>/versions/<int:version>/retire/", views.template_retire, name="template-retire"),
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/new/", views.cluster_create, name="cluster-new"),
    path("clusters/<slug:name>/", views.cluster_detail, name="cluster"),
    path("clusters/<slug:name>/test/", views.cluster_test, name="cluster-test"),
    path("clusters/<slug:name>/schedulers/", views.cluster_schedulers, name="cluster-schedulers"),
    path("webhooks/", views.webhook_list, name="webhooks"),
    path("webhooks/<int:pk>/test/", views.webhook_test, name="webhook-test"),
]
