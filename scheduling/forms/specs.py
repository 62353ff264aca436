"""Parse what users type into spec and override textareas: YAML (which also accepts JSON) into a dict.

YAML here is a data format, nothing more (issue 15, H5/L2): the loader is PyYAML's SafeLoader (no Python
objects) refusing anchors and aliases (a 575-byte "billion laughs" expands to 70 MB), with the text's length and
the nesting depth capped before anything is built (services/templates/spec_limits.py: the composer recurses once per
level, so deep input would otherwise be a RecursionError, a 500). Every refusal is a ValidationError naming the
field and the limit.
"""
from __future__ import annotations

import yaml
from django.core.exceptions import ValidationError

from ..services.templates import spec_limits


class DataOnlyLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors (`&a`), aliases (`*a`) and merge keys' sources, and nesting deeper than
    `spec_limits.MAX_DEPTH`. Raises yaml.MarkedYAMLError subclasses, reported with line and column."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed; write the value out",
                                              event.start_mark)
        event = self.peek_event()
        if getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "anchors (&name) are not allowed; write the value out",
                                              event.start_mark)
        nesting = isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
        if nesting:
            self._depth += 1
            if self._depth > spec_limits.MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {spec_limits.MAX_DEPTH} levels deep; at most "
                                f"{spec_limits.MAX_DEPTH} allowed", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            if nesting:
                self._depth -= 1


def parse_yaml_or_json(text: str, field: str, *, allow_empty: bool = False) -> dict | None:
    """The mapping in `text`, or None when it is blank and `allow_empty`.

    Raises ValidationError({field: ...}) naming the line and column of a syntax error, an anchor or alias, or
    nesting past the depth limit; saying the text or the value is larger than the size limit
    (`spec_limits.max_bytes()` characters); or saying the top level is not a mapping.
    """
    if not text or not text.strip():
        if allow_empty:
            return None
        raise ValidationError({field: "is required"})
    limit = spec_limits.max_bytes()
    if len(text) > limit:
        raise ValidationError({field: f"is {len(text)} characters; at most {limit} allowed"})
    try:
        value = yaml.load(text, Loader=DataOnlyLoader)  # noqa: S506 - DataOnlyLoader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ValidationError({field: f"is not valid YAML or JSON{where}: {problem}"}) from None
    except RecursionError:  # a deep flow collection the depth cap did not see first: still the user's input
        raise ValidationError({field: f"is nested too deeply; at most {spec_limits.MAX_DEPTH} levels allowed"}
                              ) from None
    if not isinstance(value, dict):
        raise ValidationError({field: f"must be a mapping (an object), got {type(value).__name__}"})
    spec_limits.check(value, field)
    return value


def dump_yaml(value) -> str:
    """Block YAML of a value for a textarea (key order kept)."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
