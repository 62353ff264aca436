"""Template filters of the dashboard: durations in words, YAML rendering, numbers for SVG attributes."""
from __future__ import annotations

import yaml
from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from ..views.display import humanize_seconds

register = template.Library()


@register.filter
def since(value) -> str:
    """Time elapsed since an aware datetime, in words ("3m 05s"); an em dash for None."""
    if not value:
        return "—"
    return humanize_seconds((timezone.now() - value).total_seconds())


@register.filter
def duration(seconds) -> str:
    """Seconds in words ("2h 07m"); an em dash for None."""
    return humanize_seconds(seconds)


@register.filter
def to_yaml(value) -> str:
    """A JSON-like value as block YAML (PyYAML safe_dump, key order kept): what kubectl users read."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


@register.filter
def svgnum(value) -> str:
    """A number for an SVG attribute: dot decimal separator regardless of locale, at most 3 decimals."""
    return f"{float(value or 0):.3f}".rstrip("0").rstrip(".")


@register.filter
def get_item(mapping, key):
    """`mapping[key]` for templates (None when missing)."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def num(value) -> str:
    """A number for people: "34,000", "0.5" (amounts.format_number); an em dash for None."""
    from ..amounts import format_number

    return "—" if value is None else format_number(value)


@register.filter
def amount(value, resource: str) -> str:
    """An amount in KAI queue units (devices, millicores, MB) in the dashboard's one unit style for people:
    `{{ asks.cpu|amount:"cpu" }}` -> "8.5 CPU cores" (amounts.for_people)."""
    from ..amounts import for_people

    return for_people(resource, value)


@register.filter
def answer_amount(value, resource: str) -> str:
    """A number of an answer about use, already in its people unit (amounts.in_answer / base_in_answer: GPUs, CPU
    cores, GiB), with that unit: `{{ 8|answer_amount:"cpu" }}` -> "8 CPU cores", "1 GPU"; the API's number,
    unchanged but for thousands separators and at most 2 decimals (amounts.format_number). None -> "unknown"."""
    from ..amounts import format_number, unit_words

    return "unknown" if value is None else f"{format_number(value)} {unit_words(resource, value)}"


@register.simple_tag
def quota_bar_svg(bar):
    """One queue's quota bar (`bar`: a views.display.QuotaBar) as SVG: track, limit region, requested, allocated,
    over-quota part and the quota mark, geometry in attributes only (CSP-safe). A tag rather than an included
    template: a queue level draws hundreds of these (bench/: includes were most of the expand's time)."""
    parts = [format_html('<svg role="img" aria-label="{}: {}" data-limit="{}" data-over-quota="{}" '
                         'preserveAspectRatio="none">', bar.resource, bar.summary,
                         "unlimited" if bar.unlimited else svgnum(bar.limit_pct), "yes" if bar.over_quota else "no"),
             '<rect class="q-track" x="0" y="2" width="100%" height="12" rx="2"></rect>']
    if bar.limit_pct:
        parts.append(format_html('<rect class="q-limit" x="0" y="2" width="{}%" height="12" rx="2"></rect>',
                                 svgnum(bar.limit_pct)))
    parts.append(format_html('<rect class="q-requested" x="0" y="4" width="{}%" height="8"></rect>',
                             svgnum(bar.requested_pct)))
    parts.append(format_html('<rect class="q-allocated" x="0" y="4" width="{}%" height="8"></rect>',
                             svgnum(bar.allocated_pct)))
    if bar.over_quota:
        parts.append(format_html('<rect class="q-over" x="{}%" y="4" width="{}%" height="8"></rect>',
                                 svgnum(bar.quota_pct), svgnum(bar.over_pct)))
    if bar.unlimited:  # an open end, never a region: the track fades out where a limit would be
        parts.append('<line class="q-unlimited" x1="96%" x2="100%" y1="8" y2="8"></line>')
    if bar.quota_set:
        quota = svgnum(bar.quota_pct)
        parts.append(format_html('<line class="q-quota" x1="{}%" x2="{}%" y1="0" y2="16"></line>', quota, quota))
    if bar.fair_share is not None:  # the queue page's bars: where its fair share ends
        fair = svgnum(bar.fair_pct)
        parts.append(format_html('<line class="q-fair" data-fair="{}" x1="{}%" x2="{}%" y1="0" y2="16"></line>',
                                 svgnum(bar.fair_share), fair, fair))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every variable part went through format_html
