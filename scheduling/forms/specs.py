"""Parse what users type into spec and override textareas: YAML (which also accepts JSON) into a dict."""
from __future__ import annotations

import yaml
from django.core.exceptions import ValidationError


def parse_yaml_or_json(text: str, field: str, *, allow_empty: bool = False) -> dict | None:
    """The mapping in `text`, or None when it is blank and `allow_empty`.

    Raises ValidationError({field: ...}) naming the line and column of a syntax error, or saying the top
    level is not a mapping.
    """
    if not text or not text.strip():
        if allow_empty:
            return None
        raise ValidationError({field: "is required"})
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ValidationError({field: f"is not valid YAML or JSON{where}: {problem}"}) from None
    if not isinstance(value, dict):
        raise ValidationError({field: f"must be a mapping (an object), got {type(value).__name__}"})
    return value


def dump_yaml(value) -> str:
    """Block YAML of a value for a textarea (key order kept)."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
