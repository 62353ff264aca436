"""Size and depth limits on the JSON documents users store: template specs (API, form, preview) and job overrides.

A template spec is stored once and read by every list, page and submit after it, so a spec that is huge (a YAML
alias bomb expands 575 bytes into 70 MB) or deeply nested (recursive code on it — `copy.deepcopy`, the YAML
dumper, the JSON encoder — raises RecursionError, a 500) is a persistent denial of service (issue 15, H5/L2).
Limits:

- depth: at most `MAX_DEPTH` nested objects/arrays (the deepest Kubernetes pod-spec path a template needs,
  `podSets[].template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]
  .matchExpressions[].values[]`, is 14);
- size: at most `settings.GANGWEB_MAX_SPEC_BYTES` characters as compact JSON (default 256 KiB; Kubernetes itself
  stores objects of at most 1.5 MiB in etcd, and a whole gang's spec is far below that).

Both are measured by one iterative walk (no recursion, so the check itself cannot overflow the stack) that stops
as soon as a limit is passed.
"""
from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import ValidationError

MAX_DEPTH = 32
DEFAULT_MAX_BYTES = 256 * 1024


def max_bytes() -> int:
    """The size limit in characters of compact JSON: settings.GANGWEB_MAX_SPEC_BYTES."""
    return int(getattr(settings, "GANGWEB_MAX_SPEC_BYTES", DEFAULT_MAX_BYTES))


def problem(value, *, limit_bytes: int | None = None) -> str | None:
    """What is wrong with `value` (decoded JSON: dicts, lists, strings, numbers, bools, None), or None when it is
    within both limits. The message names the limit: "is nested 40 levels deep; at most 32 allowed" or "is larger
    than 262144 characters as JSON (at most 262144 allowed)". Sizes count compact JSON (`separators=(",", ":")`)."""
    limit_bytes = max_bytes() if limit_bytes is None else limit_bytes
    size = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth + 1 > MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep (objects and lists); at most {MAX_DEPTH} allowed"
            size += 2 + max(len(item) - 1, 0)  # braces, commas
            for key, sub in item.items():
                size += len(json.dumps(key)) + 1  # "key":
                stack.append((sub, depth + 1))
        elif isinstance(item, list):
            if depth + 1 > MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep (objects and lists); at most {MAX_DEPTH} allowed"
            size += 2 + max(len(item) - 1, 0)
            stack.extend((sub, depth + 1) for sub in item)
        elif isinstance(item, str):
            size += len(item) + 2 if item.isascii() and item.isprintable() and '"' not in item and "\\" not in item \
                else len(json.dumps(item))
        else:
            size += len(json.dumps(item)) if isinstance(item, (int, float, bool)) or item is None else len(str(item))
        if size > limit_bytes:
            return f"is larger than {limit_bytes} characters as JSON; at most {limit_bytes} allowed"
    return None


def check(value, field: str) -> None:
    """Raise ValidationError({field: problem}) when `value` is over a limit (see `problem`)."""
    found = problem(value)
    if found:
        raise ValidationError({field: found})
