"""The submit form page: pick a template (GET ?template=), fill in its overrides, POST to submit."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, Subquery
from django.shortcuts import redirect, render

from ..db import related
from ..forms.jobs import SubmitForm
from ..models import Cluster, QueuePolicy, RuntimeTemplate, RuntimeTemplateVersion
from ..services.access import roles as access
from ..services.access import templates as template_access
from .common import is_htmx


def _latest_version(user, name: str | None):
    if not name:
        return None
    # The template's key first (a subquery run once), then its versions by index, the template's name by a lookup:
    # no join for stale statistics to turn into a scan of every version per template (db/related.py).
    visible = template_access.visible_templates(user, RuntimeTemplate.objects.all())
    spec = {"template": ["name", "description", "queue"]}
    versions = RuntimeTemplateVersion.objects.filter(template_id=Subquery(visible.filter(name=name).values("pk")[:1]))
    version = related.annotate(versions, spec).order_by("-version").first()
    return related.attach([version], spec)[0] if version else None


@login_required
def submit(request):
    """GET/POST /submit/. Choosing a template re-renders the form with that template's override inputs
    (htmx swaps the form in place; without JavaScript the "Load template" button does a plain GET)."""
    source = request.POST if request.method == "POST" else request.GET
    user = request.user
    version = _latest_version(user, source.get("template"))
    # Leaves: no child, asked of the parent_id index per queue (a scalar subquery; a join or NOT EXISTS may be
    # planned as a scan of every queue per queue when statistics are stale, issue 14).
    leaf_queues = access.visible_queues(user, QueuePolicy.objects.annotate(any_child=Subquery(
        QueuePolicy.objects.filter(parent_id=OuterRef("pk")).order_by().values("pk")[:1])).filter(any_child=None))
    choices = {  # what this user may see; the service still decides what they may submit to
        "templates": list(template_access.visible_templates(user, RuntimeTemplate.objects.all())
                          .values_list("name", flat=True)),
        "queues": list(leaf_queues.values_list("name", flat=True)),
        "clusters": list(access.visible_clusters(user, Cluster.objects.all()).values_list("name", flat=True)),
    }
    if request.method == "POST" and "load" not in request.POST:
        form = SubmitForm(request.POST, version=version, **choices)
        if form.is_valid():
            job = form.submit(request.user)
            if job is not None:
                messages.success(request, f"Job {job} submitted.")
                for warning in getattr(job, "submit_warnings", None) or []:
                    messages.warning(request, warning["message"])
                return redirect("scheduling:job", pk=job.pk)
    else:
        initial = {k: v for k, v in source.items() if k != "load"}
        form = SubmitForm(initial=initial, version=version, **choices)
    template = "scheduling/partials/submit_form.html" if is_htmx(request) else "scheduling/submit.html"
    return render(request, template, {"section": "submit", "form": form, "version": version})
