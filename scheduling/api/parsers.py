"""Request body parsing with limits: the size Django allows, and JSON that cannot exhaust the stack.

The API takes JSON only (settings.REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] lists this parser alone): a form or
multipart body is 415 before it is read, so no file part is spooled to disk.

Python's json module raises RecursionError (a 500 through DRF's JSONParser) on deeply nested input; this parser
answers 400, and so it does for any body nested deeper than MAX_JSON_DEPTH (what passes json.loads can still be
too deep for the recursive code after it: the encoder, copy.deepcopy). Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE
are 413 (DRF 3.16+ already stops at Django's check, which api/errors.py turns into 413; the read limit here keeps
that true for any stream).
"""
import codecs
import json
import re

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings


class RequestTooLarge(exceptions.APIException):
    """The body is larger than settings.DATA_UPLOAD_MAX_MEMORY_SIZE: 413."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large"
    default_code = "too_large"


def _refuse_constant(name):
    raise ValueError(f"{name} is not valid JSON")


# A template spec may nest services.templates.spec_limits.MAX_DEPTH (32) levels; the body around it adds a few.
MAX_JSON_DEPTH = 64


def _too_deep(value) -> bool:
    """True when `value` nests objects/arrays deeper than MAX_JSON_DEPTH (an iterative walk)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                return True
            stack.extend((sub, depth + 1) for sub in (item.values() if isinstance(item, dict) else item))
    return False


# NUL: PostgreSQL text cannot store it. A lone UTF-16 surrogate (JSON "\ud800" without its pair): not a character,
# so no UTF-8 encoder writes it; stored in a JSON field it made every later read of that row a 500.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _nul_path(value, path="body"):
    """The path of the first string (or key) holding a NUL character or a lone surrogate, or None."""
    if isinstance(value, str):
        return path if UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = path if UNSTORABLE.search(key) else _nul_path(item, f"{path}.{key}")
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _nul_path(item, f"{path}[{i}]")
            if found:
                return found
    return None


class BoundedJSONParser(JSONParser):
    """JSON of at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes (413 beyond); NaN, Infinity, NUL characters in strings
    and nesting deeper than the interpreter's recursion limit are 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestTooLarge(f"request body is larger than {limit} bytes")
        try:
            text = codecs.decode(raw, encoding)
            strict = {"parse_constant": _refuse_constant} if api_settings.STRICT_JSON else {}
            data = json.loads(text, **strict)
            if _too_deep(data):
                raise exceptions.ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep")
            nul = _nul_path(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply") from None
        if nul:
            raise exceptions.ParseError(
                f"{nul}: NUL characters and unpaired surrogates (\\ud800-\\udfff) are not allowed")
        return data
