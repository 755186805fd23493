"""Build schema-valid response objects.

``Factory.skeleton(name)`` fills every *required* property of a component schema with a
type-correct placeholder (nullable -> None, enums -> first value, ``url``/``*_url`` ->
a URL on the fake's own base URL).  The typed builders in ``objects.py`` start from a
skeleton and override the fields that carry meaning.  The server validates each answer
against the documented response schema, so a builder that drifts from the spec fails
loudly instead of silently feeding the bot a wrong shape.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .spec import Spec

EPOCH = "2026-01-01T00:00:00Z"
_GITHUB_HOSTS = re.compile(r"https?://(?:[\w-]+\.)*(?:github\.com|githubusercontent\.com)(?=[/?#]|$)")


class Factory:
    def __init__(self, spec: Spec, base_url: str):
        self.spec = spec
        self.base = base_url.rstrip("/")
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ skeletons
    def skeleton(self, schema_name: str, /, **overrides: Any) -> dict[str, Any]:
        if schema_name not in self._cache:
            schema = self.spec.doc["components"]["schemas"][schema_name]
            self._cache[schema_name] = self._fill(schema, schema_name, depth=0)
        obj = copy.deepcopy(self._cache[schema_name])
        obj.update(overrides)
        return obj

    def _fill(self, schema: Any, prop: str, depth: int) -> Any:
        schema = self.spec.deref(schema)
        if depth > 12:
            return None
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for sub in schema["allOf"]:
                part = self._fill(sub, prop, depth + 1)
                if isinstance(part, dict):
                    merged.update(part)
            return merged
        if schema.get("nullable") and depth > 0:
            return None
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self._fill(schema[key][0], prop, depth + 1)
        if "enum" in schema:
            return next((v for v in schema["enum"] if v is not None), None)
        typ = schema.get("type")
        if typ == "object" or (typ is None and "properties" in schema):
            props = schema.get("properties", {})
            return {k: self._fill(props.get(k, {}), k, depth + 1) for k in schema.get("required", [])}
        if typ == "array":
            return []
        if typ == "integer":
            return int(schema.get("minimum", 0))
        if typ == "number":
            return 0
        if typ == "boolean":
            return False
        if typ == "string":
            fmt = schema.get("format")
            if fmt == "date-time":
                return EPOCH
            if fmt == "uri" or prop == "url" or prop.endswith("_url"):
                return f"{self.base}/_unset/{prop}"
            if fmt == "email":
                return "nobody@example.invalid"
            return ""
        return None

    # ------------------------------------------------------------------ urls
    def api(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def html(self, path: str) -> str:
        # There is no web UI; html links point at the fake too (under /_html/).
        return f"{self.base}/_html/{path.lstrip('/')}"

    def rewrite_urls(self, obj: Any) -> Any:
        """Point every github.com URL inside ``obj`` at the fake (in place, returns obj)."""
        if isinstance(obj, dict):
            for k, v in obj.items():
                obj[k] = self.rewrite_urls(v)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                obj[i] = self.rewrite_urls(v)
        elif isinstance(obj, str) and "github" in obj:
            return _GITHUB_HOSTS.sub(self.base, obj)
        return obj
