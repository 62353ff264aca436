"""Cancel several jobs from the jobs list: tick them, confirm on one page that lists them, see what happened to
each. services/bulk_cancel.py does the work, as for POST /api/v1/jobs/cancel/ (each job through the single cancel,
checked for permission on its own)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.views.decorators.http import require_POST

from ..forms.errors import error_items
from ..services import bulk_cancel


@login_required
@require_POST
def jobs_cancel(request):
    """POST /jobs/cancel/ with `ids` (the ticked rows): without `confirm`, the confirmation page listing each job
    and whether you may cancel it (nothing changes); with `confirm`, cancel them and list what happened to each.
    No job ticked, or a forged id, answers the page with the error (400) and changes nothing. `back` is the list's
    query string, for the links back to it."""
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
        context["done"] = True
    else:
        rows = bulk_cancel.preview(request.user, ids)
    context.update(rows=rows, ids=ids, allowed=[r for r in rows if r["cancelled"]],
                   refused=[r for r in rows if not r["cancelled"]])
    return render(request, "scheduling/jobs_cancel.html", context)
