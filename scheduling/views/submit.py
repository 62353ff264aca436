"""The submit form page: pick a template (GET ?template=), fill in its overrides, POST to submit."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from ..forms.jobs import SubmitForm
from ..models import Cluster, QueuePolicy, RuntimeTemplate, RuntimeTemplateVersion
from ..services import access
from .common import is_htmx


def _latest_version(user, name: str | None):
    if not name:
        return None
    visible = access.visible_templates(user, RuntimeTemplate.objects.all())
    return (RuntimeTemplateVersion.objects.select_related("template").filter(template__in=visible, template__name=name)
            .order_by("-version").first())


@login_required
def submit(request):
    """GET/POST /submit/. Choosing a template re-renders the form with that template's override inputs
    (htmx swaps the form in place; without JavaScript the "Load template" button does a plain GET)."""
    source = request.POST if request.method == "POST" else request.GET
    user = request.user
    version = _latest_version(user, source.get("template"))
    leaf_queues = access.visible_queues(user, QueuePolicy.objects.filter(children__isnull=True))
    choices = {  # what this user may see; the service still decides what they may submit to
        "templates": list(access.visible_templates(user, RuntimeTemplate.objects.all()).values_list("name", flat=True)),
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
