"""Runtime templates: list, detail (versions and preview), create, edit (a new version), and a live preview."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count, OuterRef, Prefetch, Subquery
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from ..db import related
from ..filtersets import RuntimeTemplateFilterSet
from ..forms.errors import error_items
from ..forms.specs import dump_yaml
from ..forms.templates import TemplateForm
from ..models import RuntimeTemplate, RuntimeTemplateVersion
from ..services.access import templates as template_access
from ..services.errors import PermissionDenied, ServiceError
from ..services.templates import policy
from ..services.templates import specs as template_service
from ..services.templates import versions as template_versions
from .common import allowed
from .preview import preview


def _may(check, user, obj) -> bool:
    try:
        check(user, obj)
    except PermissionDenied:
        return False
    return True


@login_required
def template_list(request):
    """GET /templates/: name search (the API's RuntimeTemplateFilterSet); 2 queries for any number."""
    # Version count and latest number per template by the (template, version) index, a subquery each: a join and
    # GROUP BY can be planned as a scan of every version per template when statistics are stale (issue 14).
    versions = RuntimeTemplateVersion.objects.filter(template_id=OuterRef("pk")).order_by()
    visible = template_access.visible_templates(request.user, RuntimeTemplate.objects.all())
    filterset = RuntimeTemplateFilterSet(request.GET or None, queryset=visible.annotate(
        n_versions=Subquery(versions.values("template_id").annotate(n=Count("*")).values("n")),
        latest_no=Subquery(versions.order_by("-version").values("version")[:1])))
    templates = list(filterset.qs)
    # Only the latest versions, and their specs only when within the size limit (a spec stored before the limits,
    # e.g. a 70 MB alias bomb, stays in the database: services/templates.loadable_spec).
    latest = {}
    for version in RuntimeTemplateVersion.objects.filter(template__in=templates).order_by().only(
            "template_id", "version", "created_at").annotate(shown_spec=template_service.loadable_spec()):
        version.spec, version.spec_error = template_service.spec_shown(version.shown_spec)
        version.spec = version.spec or {}
        latest[(version.template_id, version.version)] = version
    rows = [{"t": t, "latest": latest.get((t.id, t.latest_no))} for t in templates]
    return render(request, "scheduling/templates.html", {"section": "templates", "rows": rows,
                                                          "q": request.GET.get("q", "")})


@login_required
def template_detail(request, name: str):
    """GET /templates/<name>/: latest spec as YAML, the preview, and every version."""
    # Each version's author by a lookup per version, not a join (issue 14: stale statistics).
    by = {"created_by": ["username"]}
    template = get_object_or_404(RuntimeTemplate.objects.prefetch_related(
        Prefetch("versions", queryset=related.annotate(RuntimeTemplateVersion.objects.defer("spec").annotate(
                     shown_spec=template_service.loadable_spec()), by)
                 .order_by("-version"))).select_related("queue"), name=name)
    allowed(template_access.check_read_template, request.user, template)
    versions = related.attach(template.versions.all(), by)
    latest = versions[0] if versions else None
    spec = spec_error = None
    if latest is not None:  # a spec over the limits (stored before them) is named, not drawn: no 500, no 1 GB
        spec, spec_error = template_service.spec_shown(latest.shown_spec)
    return render(request, "scheduling/template_detail.html", {
        "section": "templates", "template": template, "versions": versions, "latest": latest, "spec": spec,
        "spec_error": spec_error, "preview": preview(spec) if spec is not None else None,
        "can_edit": _may(template_access.check_manage_template, request.user, template),
        "pod_security": policy.template_summary(template),
    })


@login_required
def template_create(request):
    """GET/POST /templates/new/: validated by services.templates.specs, as POST /api/v1/templates/."""
    form = TemplateForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        if request.POST.get("action") == "preview":
            spec = form.parsed_spec()
            return render(request, "scheduling/template_form.html", {
                "section": "templates", "form": form, "preview": preview(spec) if spec else None})
        version = form.save(request.user)
        if version is not None:
            messages.success(request, f"Template '{version.template.name}' created (v{version.version}).")
            return redirect("scheduling:template", name=version.template.name)
    return render(request, "scheduling/template_form.html", {"section": "templates", "form": form})


@login_required
def template_edit(request, name: str):
    """GET/POST /templates/<name>/edit/: saving stores a new version; jobs already submitted keep theirs."""
    template = get_object_or_404(RuntimeTemplate, name=name)
    allowed(template_access.check_manage_template, request.user, template)
    latest = template.versions.defer("spec").annotate(shown_spec=template_service.loadable_spec()).order_by(
        "-version").first()
    spec = template_service.spec_shown(latest.shown_spec)[0] if latest else None
    initial = {"description": template.description, "spec": dump_yaml(spec) if spec is not None else ""}
    form = TemplateForm(request.POST or None, instance=template, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        if request.POST.get("action") == "preview":
            spec = form.parsed_spec()
            return render(request, "scheduling/template_form.html", {
                "section": "templates", "form": form, "template": template, "preview": preview(spec) if spec else None})
        version = form.save(request.user)
        if version is not None:
            same = latest is not None and version.pk == latest.pk
            messages.success(request, "No change: the spec equals the latest version." if same else
                             f"Saved as version {version.version}.")
            return redirect("scheduling:template", name=template.name)
    return render(request, "scheduling/template_form.html", {"section": "templates", "form": form,
                                                              "template": template})


@login_required
@require_POST
def template_preview(request):
    """POST /templates/preview/ (htmx): validate the spec textarea and return the preview fragment."""
    form = TemplateForm(request.POST, instance=RuntimeTemplate(name="preview"), user=request.user)
    spec = form.parsed_spec() if form.is_valid() else None
    return render(request, "scheduling/partials/template_preview.html", {"form": form,
                                                                         "preview": preview(spec) if spec else None})


@login_required
@require_POST
def template_retire(request, name: str, version: int):
    """POST /templates/<name>/versions/<n>/retire/: services.templates.versions.retire_version, as the API's
    POST /api/v1/templates/<name>/versions/<n>/retire/; back to the template page with the outcome."""
    template = get_object_or_404(RuntimeTemplate, name=name)
    allowed(template_access.check_read_template, request.user, template)
    try:
        template_versions.retire_version(request.user, template, version)
    except (ServiceError, ValidationError) as exc:
        for path, message in error_items(exc):
            messages.error(request, message if path in ("", "detail", "template", "version") else f"{path}: {message}")
    else:
        messages.success(request, f"Version {version} is retired: it takes no new jobs.")
    return redirect("scheduling:template", name=template.name)
