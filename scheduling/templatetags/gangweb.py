"""Template filters of the dashboard: durations in words, YAML rendering, numbers for SVG attributes."""
from __future__ import annotations

import yaml
from django import template
from django.utils import timezone

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
    """A number for people: "34,000", "0.5" (views.display.format_number); an em dash for None."""
    from ..views.display import format_number

    return "—" if value is None else format_number(value)
