"""Cancel several jobs from the jobs list: tick them, confirm on one page that lists them, see what happened to
each. services/jobs/bulk_cancel.py does the work, as for POST /api/v1/jobs/cancel/ (each job through the single cancel,
checked for permission on its own).

The confirm POST redirects to the result (post/redirect/get): the result rows are kept in the session under a
token named in the redirect's `?done=`, so reloading the result page shows it again and cancels nothing."""
from __future__ import annotations

import secrets

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode

from ..forms.errors import error_items
from ..models import GangJob
from ..services.access import roles as access
from ..services.jobs import bulk_cancel

SESSION_KEY = "gangweb:bulk-cancel-result"
ROW_FIELDS = ("id", "name", "namespace", "cancelled", "status", "reason")


def _split(rows: list[dict]) -> dict:
    return {"rows": rows, "allowed": [r for r in rows if r["cancelled"]],
            "refused": [r for r in rows if not r["cancelled"]]}


@login_required
def jobs_cancel(request):
    """POST /jobs/cancel/ with `ids` (the ticked rows): without `confirm`, the confirmation page listing each job
    and whether you may cancel it (nothing changes); with `confirm`, cancel them and redirect (303) to
    GET /jobs/cancel/?done=<token>, the page listing what happened to each. No job ticked, or a forged id, answers
    the page with the error (400) and changes nothing. `back` is the list's query string, for the links back to
    it. A GET without your latest result's token redirects to the jobs list (there is nothing to confirm)."""
    if request.method == "GET":
        return _result(request)
    if request.method != "POST":
        return HttpResponseNotAllowed(["GET", "POST"])
    back = request.POST.get("back", "")[:2000]
    context = {"section": "jobs", "back": back}
    try:
        ids = bulk_cancel.parse_ids(request.POST.getlist("ids"))
    except ValidationError as exc:
        messages = [m for _path, m in error_items(exc)]
        if not request.POST.getlist("ids"):
            messages = ["No job selected: tick the jobs to cancel in the list first."]
        return render(request, "scheduling/jobs_cancel.html", {**context, "errors": messages}, status=400)
    if request.POST.get("confirm"):
        rows = bulk_cancel.cancel_many(request.user, ids)
        token = secrets.token_urlsafe(12)
        request.session[SESSION_KEY] = {"token": token, "back": back,
                                        "rows": [{k: r[k] for k in ROW_FIELDS} for r in rows]}
        # 303 See Other: the browser GETs the result, so a reload there repeats no POST.
        return HttpResponseRedirect(f"{reverse('scheduling:jobs-cancel')}?{urlencode({'done': token})}", status=303)
    rows = bulk_cancel.preview(request.user, ids)
    return render(request, "scheduling/jobs_cancel.html", {**context, **_split(rows), "ids": ids})


def _result(request):
    """The result page of the latest confirmed bulk cancel (its rows from the session, each job read again for
    its queue, cluster and current phase), or a redirect to the jobs list when `?done=` does not name it."""
    kept = request.session.get(SESSION_KEY) or {}
    token = request.GET.get("done", "")
    if not token or not kept.get("token") or not secrets.compare_digest(str(kept["token"]), token):
        return redirect("scheduling:jobs")
    rows = [dict(r) for r in kept.get("rows", [])]
    seen = access.visible_jobs(request.user, GangJob.objects.filter(pk__in=[r["id"] for r in rows]).select_related(
        "queue", "cluster").only("id", "name", "namespace", "phase", "queue__name", "cluster__name"))
    jobs = {j.pk: j for j in seen}
    for r in rows:
        r["job"] = jobs.get(r["id"]) if r["name"] else None
    return render(request, "scheduling/jobs_cancel.html",
                  {"section": "jobs", "back": kept.get("back", ""), "done": True, **_split(rows)})
