"""What the planner reads, gathered once: a typed, read-only view of the facts, the kernel
signature and the checkout (``read_inputs``).

``Facts`` answers one dotted key at a time; the planner's modules receive this view instead, so
the plan's inputs flow down from ``build_plan`` and no planner module goes back to ask for a key.
Each fact keeps the source it came from (``Given``), and a value of the wrong type counts as not
given, as the planner's own checks did (the contract schema already refuses such values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

from bot.infer.facts import Fact, Facts
from bot.plan import sweep
from bot.plan.types import TestWiring
from bot.read.types import Entry, FileUse, KernelSignature
from bot.targets.checkout import Checkout
from bot.targets.types import Source, Target

T = TypeVar("T")


@dataclass(frozen=True)
class Given(Generic[T]):
    """A value one source gave, with that source."""

    value: T
    source: Source


@dataclass(frozen=True)
class FfiInputs:
    """The ``ffi.*`` facts: what the contract (or a reader) says about the C side."""

    dtype_from: Given[str] | None
    dtypes: Given[tuple[str, ...]] | None
    type_generics: Mapping[str, Given[str]]  # type generic -> the dtype passed for it
    generics: Mapping[str, Given[str]]  # const generic -> the C argument feeding it
    derived_generics: Mapping[str, Given[str | None]]  # const generic -> its FFI expression
    scalars: Mapping[str, Given[str]]  # kernel scalar -> FFI expression, or "arg"
    grids: Mapping[str, Given[tuple[str, ...]]]  # entry -> its three grid terms
    checks: tuple[Mapping[str, str], ...]  # {"when": expr, "rc": code}
    sequence: Given[tuple[object, ...]] | None  # entries launched one after the other
    variants: Given[Mapping[str, str]] | None  # entry -> condition
    selector: str | None
    dispatch_key: str | None


@dataclass(frozen=True)
class PythonInputs:
    """The ``python.*`` facts: the wrapper's registration, signature, values and launch."""

    register_kind: str  # "direct" | "getter" | "" (nobody says)
    register_name: str | None
    inner_name: Given[str] | None  # a getter's returned function
    inner_signature: str
    tensor_params: tuple[str, ...]
    signature: Given[str] | None
    out_cols: Given[str] | None
    out_param: Given[str] | None
    generics: Mapping[str, Given[str]]  # const generic -> Python expression
    steps: Given[tuple[object, ...]] | None  # as written: checked where they become PyStep
    alloc: Given[Mapping[str, str]] | None
    tensors: Given[Mapping[str, str]] | None
    args: Mapping[str, Given[str]]  # C argument -> Python value
    configs: Given[tuple[Mapping[str, object], ...]] | None  # config groups
    key: str
    result: Given[str] | None
    dtypes: Given[tuple[str, ...]] | None
    per_element: Given[Mapping[str, object]] | None  # C tensor -> {list, item}
    out_cols_var: Given[str] | None  # the reference's name for the output's column count

    def from_porter(self, given: Given | None) -> bool:
        """Whether the porter wrote it (the contract or stage B's block), not a reader."""
        return given is not None and given.source.kind in PORTER


PORTER = ("contract", "agent_b")


@dataclass(frozen=True)
class PlanInputs:
    op: str
    symbol: str
    module: str
    entries: tuple[Entry, ...]
    file_uses: tuple[FileUse, ...]
    style: str
    style_source: Source
    tests: tuple[TestWiring, ...]  # one per test file that exercises the op, the primary first
    ffi: FfiInputs
    python: PythonInputs
    contract_lines: int
    tried: Mapping[str, tuple[str, ...]]  # key -> what was tried for it and why it gave nothing
    # the wrapper is the reference's host code carried over (plan.carry): each of its launches is
    # one C call of the entry it names, on the grid it passes
    carried: bool = False
    # kernel.rs scalars the carried launches pass -> where each pairs with a cuTile parameter
    carried_scalars: Mapping[str, str] = field(default_factory=dict)

    def primary_test(self) -> TestWiring:
        """The primary test file's wiring (an empty one when no test reaches the op)."""
        return self.tests[0] if self.tests else TestWiring("", "", None)


def read_inputs(target: Target, signature: KernelSignature, facts: Facts, checkout: Checkout) -> PlanInputs:
    return PlanInputs(
        op=target.op,
        symbol=target.symbol,
        module=signature.module,
        entries=tuple(signature.entries),
        file_uses=tuple(signature.file_uses),
        style=checkout.style,
        style_source=checkout.style_source,
        tests=test_wirings(checkout),
        ffi=ffi_inputs(facts),
        python=python_inputs(facts),
        contract_lines=int(facts.get("contract.lines", 0) or 0),
        tried=MappingProxyType({key: tuple(lines) for key, lines in facts.tried.items()}),
    )


def test_wirings(checkout: Checkout) -> tuple[TestWiring, ...]:
    return tuple(
        TestWiring(
            site.path,
            site.scope,
            Source("checkout", f"{site.path}:{site.backends_line} {site.scope}-level _backends ({site.how})")
            if site.backends_line
            else Source("checkout", f"{site.path}: no _backends ({site.how})"),
        )
        for site in checkout.test_sites
    )


def ffi_inputs(facts: Facts) -> FfiInputs:
    dtypes = _given(facts, "ffi.dtypes", list)
    grids = {
        entry: Given(tuple(str(g) for g in fact.value), fact.source)
        for entry, fact in facts.under("ffi.grid").items()
        if isinstance(fact.value, list) and len(fact.value) == 3
    }
    sequence = _given(facts, "ffi.sequence", list)
    variants = _given(facts, "ffi.variants", dict)
    return FfiInputs(
        dtype_from=_given(facts, "ffi.dtype_from", str),
        dtypes=Given(tuple(str(d) for d in dtypes.value), dtypes.source) if dtypes and dtypes.value else None,
        type_generics=_strings_under(facts, "ffi.type_generics"),
        generics=_strings_under(facts, "ffi.generics"),
        derived_generics=MappingProxyType(
            {
                name: Given(None if fact.value is None else str(fact.value), fact.source)
                for name, fact in facts.under("ffi.derived_generics").items()
            }
        ),
        scalars=_strings_under(facts, "ffi.scalars"),
        grids=MappingProxyType(grids),
        checks=tuple(
            MappingProxyType({"when": str(c["when"]), "rc": str(c.get("rc", "INVALID_ARGS"))})
            for c in facts.get("ffi.checks") or []
            if isinstance(c, dict)
        ),
        sequence=Given(tuple(sequence.value), sequence.source) if sequence else None,
        variants=Given(
            MappingProxyType({name: str(cond) for name, cond in variants.value.items()}), variants.source
        )
        if variants
        else None,
        selector=_value(facts, "ffi.selector", str),
        dispatch_key=_value(facts, "ffi.dispatch_key", str),
    )


def python_inputs(facts: Facts) -> PythonInputs:
    name = facts.get("python.register.name")
    configs = facts.source("python.configs")
    return PythonInputs(
        register_kind=str(facts.get("python.register.kind") or ""),
        register_name=None if name is None else str(name),
        inner_name=_given(facts, "python.inner_name", str),
        inner_signature=str(facts.get("python.inner_signature") or ""),
        tensor_params=tuple(facts.get("python.tensor_params") or ()),
        signature=_given(facts, "python.signature", str),
        out_cols=_given(facts, "python.out_cols", str),
        out_param=_string(facts, "python.out_param"),
        generics=_strings_under(facts, "python.generics"),
        steps=_sequence(facts, "python.steps"),
        alloc=_mapping(facts, "python.alloc"),
        tensors=_mapping(facts, "python.tensors"),
        args=MappingProxyType(
            {name: Given(str(fact.value), fact.source) for name, fact in _valued(facts, "python.args")}
        ),
        configs=Given(*sweep.fit(config_groups(facts.get("python.configs")), configs)) if configs else None,
        key=str(facts.get("python.key") or ""),
        result=_given(facts, "python.result", str),
        dtypes=_strings(facts, "python.dtypes"),
        per_element=_given(facts, "python.per_element", dict),
        out_cols_var=_given(facts, "reference.out_cols_var", str),
    )


def config_groups(raw: object) -> tuple[Mapping[str, object], ...]:
    """Config groups: ``({"when": cond, "configs": [..]}, ..)``; a plain list is one group for every call."""
    if not raw or not isinstance(raw, list):
        return ()
    if all(isinstance(c, dict) and "configs" in c for c in raw):
        return tuple({"when": str(g.get("when", "always")), "configs": list(g["configs"])} for g in raw)
    return ({"when": "always", "configs": list(raw)},)


# --------------------------------------------------------------------------- reading one key


def _given(facts: Facts, key: str, kind: type) -> Given | None:
    fact = facts.items.get(key)
    return Given(fact.value, fact.source) if fact is not None and isinstance(fact.value, kind) else None


def _value(facts: Facts, key: str, kind: type) -> object | None:
    value = facts.get(key)
    return value if isinstance(value, kind) else None


def _string(facts: Facts, key: str) -> Given[str] | None:
    """A fact read with ``str()`` whatever its type, when it is set to something."""
    fact = facts.items.get(key)
    return Given(str(fact.value), fact.source) if fact is not None and fact.value else None


def _strings(facts: Facts, key: str) -> Given[tuple[str, ...]] | None:
    found = _given(facts, key, list)
    return Given(tuple(str(v) for v in found.value), found.source) if found else None


def _sequence(facts: Facts, key: str) -> Given[tuple[object, ...]] | None:
    found = _given(facts, key, list)
    return Given(tuple(found.value), found.source) if found else None


def _mapping(facts: Facts, key: str) -> Given[Mapping[str, str]] | None:
    found = _given(facts, key, dict)
    if found is None:
        return None
    return Given(MappingProxyType({str(k): str(v) for k, v in found.value.items()}), found.source)


def _strings_under(facts: Facts, prefix: str) -> Mapping[str, Given[str]]:
    """``prefix.<name>`` facts whose value is a string, by name."""
    return MappingProxyType(
        {
            name: Given(fact.value, fact.source)
            for name, fact in facts.under(prefix).items()
            if isinstance(fact.value, str)
        }
    )


def _valued(facts: Facts, prefix: str) -> list[tuple[str, Fact]]:
    """``prefix.<name>`` facts set to a value (not None), by name."""
    return [(name, fact) for name, fact in facts.under(prefix).items() if fact.value is not None]
