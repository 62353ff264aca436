"""Runtime templates: list, detail (versions and preview), create, edit (a new version), and a live preview."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max, Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from ..filtersets import RuntimeTemplateFilterSet
from ..forms.specs import dump_yaml
from ..forms.templates import TemplateForm
from ..models import RuntimeTemplate, RuntimeTemplateVersion
from ..services import access, policy
from ..services.errors import PermissionDenied
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
    visible = access.visible_templates(request.user, RuntimeTemplate.objects.select_related("queue"))
    filterset = RuntimeTemplateFilterSet(request.GET or None, queryset=visible.annotate(
        n_versions=Count("versions", distinct=True), latest_no=Max("versions__version")))
    templates = list(filterset.qs)
    latest = {(v.template_id, v.version): v for v in RuntimeTemplateVersion.objects.filter(
        template__in=templates).only("template_id", "version", "spec", "created_at")}
    rows = [{"t": t, "latest": latest.get((t.id, t.latest_no))} for t in templates]
    return render(request, "scheduling/templates.html", {"section": "templates", "rows": rows,
                                                          "q": request.GET.get("q", "")})


@login_required
def template_detail(request, name: str):
    """GET /templates/<name>/: latest spec as YAML, the preview, and every version."""
    template = get_object_or_404(RuntimeTemplate.objects.prefetch_related(
        Prefetch("versions", queryset=RuntimeTemplateVersion.objects.select_related("created_by")
                 .order_by("-version"))).select_related("queue"), name=name)
    allowed(access.check_read_template, request.user, template)
    versions = list(template.versions.all())
    latest = versions[0] if versions else None
    return render(request, "scheduling/template_detail.html", {
        "section": "templates", "template": template, "versions": versions, "latest": latest,
        "preview": preview(latest.spec) if latest else None,
        "can_edit": _may(access.check_manage_template, request.user, template),
        "pod_security": policy.template_summary(template),
    })


@login_required
def template_create(request):
    """GET/POST /templates/new/: validated by services.templates, as POST /api/v1/templates/."""
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
    allowed(access.check_manage_template, request.user, template)
    latest = template.versions.order_by("-version").first()
    initial = {"description": template.description, "spec": dump_yaml(latest.spec) if latest else ""}
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
