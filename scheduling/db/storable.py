"""Cluster text made storable: PostgreSQL refuses a NUL character in a text column ("PostgreSQL text fields cannot
contain NUL (0x00) bytes") and in a jsonb value ("unsupported Unicode escape sequence: \\u0000 cannot be converted
to text"), while the Kubernetes API server accepts one in any string (a condition message written through a status
subresource, an annotation value): stored as it is, such a string would make every status write of the job fail.
The API's own input is refused at parse time instead (api/parsers.py `UNSTORABLE`), since a user can be told.

A NUL is replaced by U+FFFD (the replacement character), in strings and mapping keys at any depth; everything else
is kept as it is (control characters are the display's concern: observe/causes.py `quote`).
"""
from __future__ import annotations

import json

NUL = "\x00"
REPLACEMENT = "\ufffd"


def _has_nul(value) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict | list | tuple):
        try:  # one C-speed pass over the whole value; the walk below only runs when it finds one
            return "\\u0000" in json.dumps(value, default=str)
        except (TypeError, ValueError):
            return True
    return False


def _clean(value):
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, dict):
        return {(_clean(k) if isinstance(k, str) else k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_clean(v) for v in value)
    return value


def storable(value):
    """`value` (a str, or JSON-shaped dicts/lists of them) with every NUL replaced by U+FFFD; the same object when
    it holds none (the common case costs one `json.dumps` of a JSON value)."""
    return _clean(value) if _has_nul(value) else value
