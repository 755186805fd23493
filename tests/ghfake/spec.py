"""GitHub's REST description, loaded once: operation routing and schema validation.

openapi-core was tried first; it cannot route the ``x-multi-segment`` paths GitHub uses
(``/repos/{owner}/{repo}/contents/{path}`` with ``path`` = ``.github/agent-d.yml`` gives
PathNotFound), so routing is done here and validation uses ``openapi-schema-validator``
(the OpenAPI 3.0 dialect of ``jsonschema``, which understands ``nullable``), resolving
``$ref`` against the whole document through a ``referencing`` registry.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import referencing
import referencing.jsonschema
from jsonschema.exceptions import best_match
from openapi_schema_validator import OAS30ReadValidator, OAS30WriteValidator, oas30_format_checker

SPEC_URI = "urn:ghfake:api.github.com"
_PARAM_RE = re.compile(r"\{([^}]+)\}")


def _esc(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


@dataclass
class Param:
    name: str
    location: str
    required: bool
    schema: dict[str, Any]
    multi_segment: bool = False


@dataclass
class Operation:
    method: str
    template: str
    operation_id: str
    pointer: str  # JSON pointer of the operation object inside the spec
    regex: re.Pattern[str]
    params: dict[tuple[str, str], Param] = field(default_factory=dict)
    body_required: bool = False
    body_schema_pointer: str | None = None
    responses: dict[str, str] = field(default_factory=dict)  # status -> pointer of response object
    literal_segments: int = 0


class Spec:
    """An index over ``api.github.com.json`` for fast lookup and validation."""

    def __init__(self, path: str | Path):
        t0 = time.perf_counter()
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            self.doc: dict[str, Any] = json.load(fh)
        self.version = self.doc.get("info", {}).get("version", "?")
        self._patch_schemas()
        resource = referencing.Resource(contents=self.doc, specification=referencing.jsonschema.DRAFT4)
        self.registry: referencing.Registry = referencing.Registry().with_resource(SPEC_URI, resource)
        self._by_method: dict[str, list[Operation]] = {}
        self._validators: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._index()
        self.load_seconds = time.perf_counter() - t0

    # ---------------------------------------------------------------- indexing
    def deref(self, obj: Any) -> Any:
        """Follow a local ``$ref`` (one level at a time until a non-ref object)."""
        while isinstance(obj, dict) and "$ref" in obj:
            obj = self.at(obj["$ref"])
        return obj

    def at(self, ref: str) -> Any:
        node: Any = self.doc
        for part in ref.lstrip("#").split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def _patch_schemas(self) -> None:
        """Two departures of GitHub's description from what its API answers, mended in one walk.

        - ``nullable: true`` must admit null even when ``enum`` does not list it: OpenAPI
          3.0.3 says such an enum must list ``null`` itself, GitHub's description does not,
          but the API answers ``null`` (``check-run.conclusion`` while queued), and
          openapi-schema-validator follows the letter of 3.0.3.
        - ``repos/get-content`` puts a ``type`` discriminator on a oneOf whose
          content-directory branch is an *array*; validators then reject every directory
          listing. Such discriminators are dropped (the oneOf itself still applies).
        """
        stack: list[Any] = [self.doc]
        while stack:
            cur = stack.pop()
            if isinstance(cur, dict):
                enum = cur.get("enum")
                if cur.get("nullable") is True and isinstance(enum, list) and None not in enum:
                    enum.append(None)
                if "discriminator" in cur and any(
                    self.deref(b).get("type") == "array" for b in cur.get("oneOf", [])
                ):
                    del cur["discriminator"]
                stack.extend(v for v in cur.values() if isinstance(v, (dict, list)))
            elif isinstance(cur, list):
                stack.extend(v for v in cur if isinstance(v, (dict, list)))

    def _index(self) -> None:
        for template, item in self.doc["paths"].items():
            for method, op in item.items():
                if method not in ("get", "post", "put", "patch", "delete", "head", "options"):
                    continue
                pointer = f"#/paths/{_esc(template)}/{method}"
                params: dict[tuple[str, str], Param] = {}
                for raw in item.get("parameters", []) + op.get("parameters", []):
                    p = self.deref(raw)
                    params[(p["in"], p["name"])] = Param(
                        p["name"],
                        p["in"],
                        bool(p.get("required", p["in"] == "path")),
                        p.get("schema", {}),
                        bool(p.get("x-multi-segment")),
                    )
                regex_parts = []
                literal = 0
                for seg in template.strip("/").split("/"):
                    pieces = _PARAM_RE.split(seg)
                    out = []
                    for i, piece in enumerate(pieces):
                        if i % 2 == 0:
                            out.append(re.escape(piece))
                            literal += bool(piece)
                        else:
                            multi = params.get(("path", piece), Param(piece, "path", True, {})).multi_segment
                            out.append(f"(?P<{_group(piece)}>{'.+' if multi else '[^/]+'})")
                    regex_parts.append("".join(out))
                regex = re.compile("^/" + "/".join(regex_parts) + "$")
                operation = Operation(
                    method=method.upper(),
                    template=template,
                    operation_id=op["operationId"],
                    pointer=pointer,
                    regex=regex,
                    params=params,
                    literal_segments=literal,
                )
                body = op.get("requestBody")
                if body is not None:
                    body_ptr = pointer + "/requestBody"
                    if "$ref" in body:
                        body_ptr = body["$ref"]
                        body = self.deref(body)
                    operation.body_required = bool(body.get("required"))
                    content = body.get("content", {})
                    if "application/json" in content and "schema" in content["application/json"]:
                        operation.body_schema_pointer = f"{body_ptr}/content/application~1json/schema"
                for status, resp in op.get("responses", {}).items():
                    ptr = resp.get("$ref", f"{pointer}/responses/{status}")
                    operation.responses[status] = ptr
                self._by_method.setdefault(operation.method, []).append(operation)
        for ops in self._by_method.values():
            # Literal segments win over parameters (pulls/comments before pulls/{pull_number}).
            ops.sort(key=lambda o: (-o.literal_segments, o.template.count("{")))

    # ---------------------------------------------------------------- routing
    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        for op in self._by_method.get(method.upper(), ()):
            m = op.regex.match(path)
            if m:
                return op, {_ungroup(k): unquote(v) for k, v in m.groupdict().items()}
        return None

    # ---------------------------------------------------------------- validation
    def _validator(self, pointer: str, kind: str) -> Any:
        key = (pointer, kind)
        v = self._validators.get(key)
        if v is None:
            cls = OAS30WriteValidator if kind == "write" else OAS30ReadValidator
            v = cls(
                {"$ref": SPEC_URI + pointer},
                registry=self.registry,
                format_checker=oas30_format_checker,
            )
            with self._lock:
                self._validators[key] = v
        return v

    def schema_errors(self, pointer: str, instance: Any, kind: str = "read", limit: int = 5) -> list[str]:
        errors = []
        for err in self._validator(pointer, kind).iter_errors(instance):
            if err.context:  # oneOf/anyOf: report the closest branch, not the whole instance
                err = best_match(err.context) or err
            where = "/".join(str(p) for p in err.absolute_path) or "<root>"
            errors.append(f"{where}: {err.message[:300]}")
            if len(errors) >= limit:
                break
        return errors

    def validate_params(
        self, op: Operation, path_params: dict[str, str], query: dict[str, list[str]], strict_query: bool
    ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """Coerce and check path and query parameters; return (path, query, problems)."""
        problems: list[str] = []
        typed_path: dict[str, Any] = {}
        typed_query: dict[str, Any] = {}
        for name, raw in path_params.items():
            p = op.params.get(("path", name))
            if p is None:
                problems.append(f"path parameter {name!r} is not described")
                continue
            typed_path[name] = self._coerce(p, [raw], problems)
        for name, values in query.items():
            p = op.params.get(("query", name))
            if p is None:
                if strict_query:
                    problems.append(f"query parameter {name!r} is not described for {op.operation_id}")
                continue
            typed_query[name] = self._coerce(p, values, problems)
        for (loc, name), p in op.params.items():
            if p.required and loc == "query" and name not in query:
                problems.append(f"required query parameter {name!r} is missing")
        return typed_path, typed_query, problems

    def _coerce(self, p: Param, values: list[str], problems: list[str]) -> Any:
        schema = self.deref(p.schema)
        typ = schema.get("type")
        value: Any
        try:
            if typ == "array":
                items = values if len(values) > 1 else values[0].split(",")
                item_type = self.deref(schema.get("items", {})).get("type")
                value = [_scalar(item_type, v) for v in items]
            else:
                if len(values) > 1:
                    problems.append(f"{p.location} parameter {p.name!r} given {len(values)} times")
                value = _scalar(typ, values[-1])
        except ValueError:
            problems.append(f"{p.location} parameter {p.name!r}={values!r} is not a valid {typ}")
            return values[-1]
        errs = list(OAS30WriteValidator(schema, format_checker=oas30_format_checker).iter_errors(value))
        problems.extend(f"{p.location} parameter {p.name!r}: {e.message}" for e in errs[:3])
        return value

    def response_schema_pointer(self, op: Operation, status: int) -> tuple[bool, str | None]:
        """(documented?, pointer of the JSON schema or None when the response has no body)."""
        ptr = op.responses.get(str(status)) or op.responses.get(f"{str(status)[0]}XX")
        if ptr is None:
            ptr = op.responses.get("default")
            if ptr is None:
                return False, None
        resp = self.deref(self.at(ptr))
        content = resp.get("content", {})
        if "application/json" in content and "schema" in content["application/json"]:
            real = self.at(ptr).get("$ref", ptr)
            return True, f"{real}/content/application~1json/schema"
        for ctype, media in content.items():
            if ctype.endswith("json") and "schema" in media:
                real = self.at(ptr).get("$ref", ptr)
                return True, f"{real}/content/{_esc(ctype)}/schema"
        return True, None


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)


def _ungroup(group: str) -> str:
    return group[2:]


def _scalar(typ: str | None, raw: str) -> Any:
    if typ == "integer":
        return int(raw)
    if typ == "number":
        return float(raw)
    if typ == "boolean":
        if raw not in ("true", "false"):
            raise ValueError(raw)
        return raw == "true"
    return raw


_CACHE: dict[Path, Spec] = {}
_CACHE_LOCK = threading.Lock()


def load_spec(path: str | Path) -> Spec:
    """Load the description once per process (shared by every test in the session)."""
    key = Path(path).resolve()
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = Spec(key)
        return _CACHE[key]
