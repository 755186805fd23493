"""How contract keys are spelled: nested (``ffi:`` -> ``scalars:`` -> ``n:``), dotted on one line
(``ffi.scalars.n: x``), or a mix. ``nest`` makes the nested form the schema checks; ``known_keys``
lists the dotted Facts keys the schema allows.
"""

from __future__ import annotations

from functools import cache

from bot.infer.contract.schema import Path, dotted, schema

# Mappings that are values in their own right: their keys are names (entries, variables), not paths.
LEAF_MAPPINGS = {"python.alloc", "python.tensors", "python.per_element", "ffi.variants"}


def nest(data: dict) -> tuple[dict, list[str]]:
    """``data`` with every dotted key split into nested mappings, and one line per path given twice."""
    out: dict = {}
    twice: list[str] = []
    _merge(out, data, (), twice)
    return out, twice


def _merge(into: dict, data: dict, path: Path, twice: list[str]) -> None:
    for key, value in data.items():
        segments = _segments(path, str(key))
        node = into
        for i, seg in enumerate(segments[:-1]):
            node = node.setdefault(seg, {})
            if not isinstance(node, dict):  # `a: x` and `a.b: y`: a is both a value and a namespace
                twice.append(f"{dotted(path + tuple(segments[: i + 1]))}: given more than once")
                break
        else:
            _place(node, segments[-1], value, path + tuple(segments), twice)


def _place(node: dict, name: str, value: object, full: Path, twice: list[str]) -> None:
    if isinstance(value, dict) and not _under_leaf(full):
        child = node.setdefault(name, {})
        if isinstance(child, dict):
            _merge(child, value, full, twice)
            return
    elif name not in node:
        node[name] = value  # a value, or anything inside a leaf mapping, is kept as written
        return
    twice.append(f"{dotted(full)}: given more than once")


def _under_leaf(path: Path) -> bool:
    return any(".".join(path[:i]) in LEAF_MAPPINGS for i in range(1, len(path)))


def _segments(path: Path, key: str) -> list[str]:
    """The path parts a key spells; below a leaf mapping the rest of a key is one name."""
    if _under_leaf(path + ("",)):
        return [key]
    parts = key.split(".")
    for i in range(1, len(parts)):
        if ".".join(path + tuple(parts[:i])) in LEAF_MAPPINGS:
            return parts[:i] + [".".join(parts[i:])]
    return parts


@cache
def known_keys() -> tuple[str, ...]:
    """The Facts keys a contract may set, read off the schema; a trailing ".*" takes any name."""
    root = schema()

    def walk(node: dict, path: str) -> list[str]:
        while "$ref" in node:  # local references only: "#/$defs/<name>"
            node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if path in LEAF_MAPPINGS:
            return [path]
        if "properties" in node:
            return [k for name, sub in node["properties"].items() for k in walk(sub, f"{path}.{name}")]
        if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
            return [f"{path}.*"]  # a family: any name below it
        return [path]

    return tuple(k for top in ("ffi", "python") for k in walk(root["properties"][top], top))
