"""The wrapper side of an autotuned op, read from its cuTile reference ``ops/cutile/<op>.py`` (``ast``).

TileGym's autotuned references share one shape: the registered function sizes the problem
(``M, K = a.shape``), allocates the output, then per variant calls a module helper that runs
``exhaustive_search(configs, stream, grid_fn, kernel, args_fn, hints_fn)``. From that we read,
for each variant: the condition that selects it, the config generator (expanded statically,
one group per GPU-capability branch), the grid, the compile hints and how config fields feed the
kernel's parameters. Reference kernel parameters are matched to kernel.rs generics by name
(``TILE_SIZE_M``/``TILE_M`` ~ ``BM``); a reference parameter kernel.rs lacks is either a tuning
hint (dropped from the configs) or a caller feature (``trans_a``), which the wrapper refuses.

Anything outside that shape is not guessed: nothing is offered and ``facts.note_tried`` says why,
so the plan reports the facts as missing.

This module reads the registered function (its prologue, the launch condition) and offers the
facts; each variant is read by ``launch.search`` (a helper running ``exhaustive_search``) or
``launch.fixed`` (bmm's branch with fixed sizes), against ``launch.variant``'s ``VariantReader``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.infer.direct.statements import raise_check
from bot.infer.facts import Facts
from bot.infer.launch.fixed import fixed_variant
from bot.infer.launch.search import passed_by_name, search_variant
from bot.infer.launch.syntax import NotThisShape, assert_step, none_default_step
from bot.infer.launch.variant import Variant, VariantReader
from bot.infer.list_params import appended_list
from bot.infer.reference.op import ReferenceOp, read_with, registered_function
from bot.infer.syntax import is_allocation, is_call
from bot.read.types import KernelSignature
from bot.targets.types import Source, Target

KEYS = ("python.steps", "python.alloc", "python.configs", "python.key", "python.args.num_programs")
Where = Callable[[str], Source]  # a source in the reference module, saying what was read there


@dataclass
class Reading:
    function: str  # "<name>():<line>" of the registered function
    steps: list[dict[str, str]]
    alloc: dict[str, str]
    variants: list[Variant]
    refused: list[str]  # caller flags the wrapper refuses, and why
    dropped: list[str]  # reference config fields kernel.rs has no place for, and why
    checks: list[dict[str, str]] = field(default_factory=list)  # FFI checks (bool flags are 0 or 1)
    keywords: dict[str, str] = field(default_factory=dict)  # the registered function's defaults


def gather(target: Target, signature: KernelSignature | None, facts: Facts, ref: ReferenceOp) -> None:
    reading = read_with(read_tree, ref, signature, facts, KEYS)
    if reading is None:
        return

    def where(what: str) -> Source:
        return Source("reference", f"{ref.rel}: {what}")

    _offer_wrapper(reading, facts, where)
    _offer_tuning(reading, facts, where)
    _offer_launches(reading, facts, where)
    _offer_own_locals(reading, signature, facts, where)


def _offer_wrapper(reading: Reading, facts: Facts, where: Where) -> None:
    """The registered function's steps before its launches (its keyword parameters the declared
    signature lacks read from ``**kwargs`` first) and its allocations."""
    from_kwargs = kwargs_steps(reading.keywords, facts.get("python.signature"))
    facts.offer(
        "python.steps",
        from_kwargs + reading.steps,
        where(
            f"{reading.function} before its launches"
            + "".join(f"; {n}" for n in reading.refused)
            + "".join(
                f"; {s['let']}: its keyword parameter, not declared: from **kwargs" for s in from_kwargs
            )
        ),
    )
    facts.offer("python.alloc", reading.alloc, where(f"{reading.function} allocation"))


def _offer_tuning(reading: Reading, facts: Facts, where: Where) -> None:
    """The autotuner's config groups (each variant's, under its condition) and its cache key."""
    groups = []
    for v in reading.variants:
        for cap, configs in v.configs:
            when = " and ".join(f"({c})" for c in (v.condition, cap) if c) or "always"
            groups.append({"when": when, "configs": configs})
    renamed = sorted({f"{k}->{n}" for v in reading.variants for k, n in v.renamed.items() if k != n})
    facts.offer(
        "python.configs",
        groups,
        where(
            "; ".join(f"{v.generator} for {v.entry}" for v in reading.variants)
            + f"; fields {', '.join(renamed)}"
            + "".join(f"; {n}" for n in reading.dropped)
        ),
    )
    key: list[str] = []
    for v in reading.variants:
        key += [k for k in v.key if k not in key]
    key += [v.condition for v in reading.variants if v.condition and v.condition not in key]
    launches = ", ".join(f"{v.kernel} -> {v.entry} ({v.condition or 'else'})" for v in reading.variants)
    facts.offer(
        "python.key",
        "(" + ", ".join(key) + ("," if len(key) == 1 else "") + ")",
        where(f"cache keys; {launches}"),
    )


def _offer_launches(reading: Reading, facts: Facts, where: Where) -> None:
    """The grid (one term, chosen by the variants' conditions), the lists launched per element,
    the flag checks, and each variant's grid terms and argument values."""
    grid = reading.variants[-1].grid0
    for v in reversed(reading.variants[:-1]):
        grid = f"({v.grid0}) if {v.condition} else ({grid})"
    where_grid = where(
        "grid of " + ", ".join(f"exhaustive_search:{v.line} ({v.entry})" for v in reading.variants)
    )
    facts.offer("python.args.num_programs", grid, where_grid)
    lists = {a.tensor: a for v in reading.variants for a in v.lists}
    if lists:
        facts.offer(
            "python.per_element",
            {t: {"list": a.list_expr, "item": a.item} for t, a in lists.items()},
            where(
                "kernel parameters walked as lists, kernel.rs taking one element: "
                + ", ".join(f"{a.item} = {a.ref_param}[...] -> {t}" for t, a in lists.items())
            ),
        )
    if reading.checks:
        facts.offer(
            "ffi.checks", reading.checks, where("boolean kernel parameters fed by the caller: 0 or 1")
        )
    for v in reading.variants:
        for name, term in zip(("grid_x", "grid_y", "grid_z"), v.grid_xyz, strict=False):
            facts.offer(f"python.args.{name}", term, where(f"grid of ct.launch:{v.line} ({v.entry})"))
        for name, value in v.values.items():
            facts.offer(f"python.args.{name}", value, where(f"{v.kernel} argument -> {v.entry}"))


def _offer_own_locals(reading: Reading, signature: KernelSignature, facts: Facts, where: Where) -> None:
    """A kernel.rs scalar no argument feeds: the reference's own local of its name, bound before
    the launches (``M, K = a.shape`` for kernel.rs's ``M``); never a name that differs in case."""
    bound = {n.strip() for step in reading.steps if "let" in step for n in step["let"].split(",")}
    for v in reading.variants:
        entry = next(e for e in signature.entries if e.name == v.entry)
        for p in entry.params:
            key = f"python.args.{p.name}"
            if (
                p.kind == "scalar"
                and p.name in bound
                and p.name not in v.values
                and not passed_by_name(p.name, v.ref_params)
                and not facts.has(key)
            ):
                facts.offer(
                    key,
                    p.name,
                    where(
                        f"kernel.rs's `{p.name}` is {reading.function}'s own `{p.name}`, bound before "
                        f"its launches and passed to no kernel parameter of {v.kernel}"
                    ),
                )


def kwargs_steps(keywords: dict[str, str], declared: object) -> list[dict[str, str]]:
    """The registered function's keyword parameters the wrapper's declared signature lacks, read
    from its ``**kwargs`` with the reference's default (group_gemm's ``transpose_b`` beside a
    declaration of ``group_A, group_B, ..., **kwargs``); none without a ``**kwargs`` to read."""
    if not isinstance(declared, str):
        return []
    try:
        args = ast.parse(f"def f({declared}):\n    pass\n").body[0].args
    except SyntaxError:
        return []
    if args.kwarg is None:
        return []
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    kwargs = args.kwarg.arg
    return [
        {"let": name, "expr": f"{kwargs}.get({name!r}, {default})"}
        for name, default in keywords.items()
        if name not in names
    ]


def read(source: str, op: str, signature: KernelSignature) -> Reading | None:
    """The reading of an autotuned reference's source text (see ``read_tree``)."""
    return read_tree(ast.parse(source), op, signature)


def read_tree(tree: ast.Module, op: str, signature: KernelSignature) -> Reading | None:
    """The reading of an autotuned reference, None when the op is not autotuned there."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    helpers = {
        name for name, f in functions.items() if any(is_call(n, "exhaustive_search") for n in ast.walk(f))
    }
    fn = registered_function(tree, op)
    if fn is None or not helpers:
        return None
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    return _Reader(op, functions, helpers, signature, params).function(fn)


class _Reader(VariantReader):
    def __init__(
        self,
        op: str,
        functions: dict[str, ast.FunctionDef],
        helpers: set[str],
        signature: KernelSignature,
        params: list[str],
    ):
        super().__init__(functions, signature, params)
        self.op = op
        self.helpers = helpers  # module functions that run exhaustive_search
        self.steps: list[dict[str, str]] = []
        self.variants: list[Variant] = []

    # ------------------------------------------------------------------ the registered function

    def function(self, fn: ast.FunctionDef) -> Reading:
        launches = [s for s in fn.body if self._launches(s)]
        if not launches:
            raise NotThisShape(f"{fn.name}() reaches no exhaustive_search helper")
        first = fn.body.index(launches[0])
        for stmt in fn.body[:first]:  # outputs first: launch helpers size things by them
            if (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.targets[0], ast.Name)
                and is_allocation(stmt.value)
            ):
                self.alloc[stmt.targets[0].id] = stmt.value
        # Read the launches first: they tell which caller flags kernel.rs cannot honour.
        for stmt in fn.body[first:]:
            if isinstance(stmt, ast.Return):
                if stmt.value is not None and self._launches(stmt):  # `return helper(...)`
                    self._dispatch(ast.Expr(stmt.value, lineno=stmt.lineno), "", "")
                continue
            self._dispatch(stmt, "", "")
        if not self.variants:
            raise NotThisShape(f"{fn.name}() launches no kernel through a helper")
        for stmt in fn.body[:first]:
            self._prologue(stmt)
        self._drop_listed_outputs()
        if not self.alloc:
            raise NotThisShape(f"{fn.name}() allocates no output with torch.empty/zeros before launching")
        refusals = [
            {
                "check": flag,
                "raise": "NotImplementedError",
                "message": f"cutile-rs {self.op}: {flag} is not supported (kernel.rs has no parameter for it)",
            }
            for flag in self.refused
        ]
        # an assert about refused flags only is already covered by the refusal
        checks = [
            assert_step(stmt, holds, self.op)
            for stmt, holds in self.launch_asserts
            if not {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)} <= set(self.refused)
        ]
        return Reading(
            function=f"{fn.name}():{fn.lineno}",
            steps=refusals + self.steps + checks,
            alloc={name: ast.unparse(call) for name, call in self.alloc.items()},
            variants=self.variants,
            refused=self.refusal_notes,
            dropped=self.dropped_notes,
            checks=self.flag_checks,
            keywords=_defaults(fn),
        )

    def _launches(self, stmt: ast.stmt) -> bool:
        return any(self._helper(n) is not None for n in ast.walk(stmt) if isinstance(n, ast.Call))

    def _helper(self, call: ast.Call) -> ast.FunctionDef | None:
        name = getattr(call.func, "id", "")
        return self.functions[name] if name in self.helpers else None

    def _prologue(self, stmt: ast.stmt) -> None:
        """One statement of the registered function before its launches, read as a wrapper step or
        an allocation; anything else is not this shape."""
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return  # docstring
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and self._prologue_assign(stmt):
            return
        if isinstance(stmt, ast.Assert):
            self.steps.append(assert_step(stmt, "", self.op))
            return
        if isinstance(stmt, ast.For) and self._prologue_for(stmt):
            return
        if isinstance(stmt, ast.If) and self._prologue_if(stmt):
            return
        raise NotThisShape(f"line {stmt.lineno}: cannot follow `{ast.unparse(stmt).splitlines()[0]}`")

    def _prologue_assign(self, stmt: ast.Assign) -> bool:
        """``x = torch.empty(..)`` an allocation, ``a, b = ..`` a step; the stream is not read."""
        target = stmt.targets[0]
        if "current_stream" in ast.unparse(stmt.value):
            return True  # the launcher takes the stream of the tensors' device itself
        if isinstance(target, ast.Name) and is_allocation(stmt.value):
            self.alloc[target.id] = stmt.value
            return True
        if isinstance(target, (ast.Name, ast.Tuple)):
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            let = ", ".join(ast.unparse(n) for n in names)
            self.steps.append({"let": let, "expr": ast.unparse(stmt.value)})
            return True
        return False

    def _prologue_for(self, stmt: ast.For) -> bool:
        """``out = []`` then ``for ...: out.append(torch.empty(...))``: a list of outputs, one per element."""
        empty = {n for st in self.steps if (n := st.get("let", "")) and st.get("expr") == "[]"}
        listed = appended_list(stmt, empty)
        if listed is None:
            return False
        name, comprehension = listed
        self.alloc[name] = comprehension
        return True

    def _prologue_if(self, stmt: ast.If) -> bool:
        """A raise as a check, a None default as a step, a refused flag's else branch, or plain
        assignments in both branches."""
        raised = raise_check(stmt)
        if raised is not None:  # `if not xs: raise ValueError("...")`: the same check
            error, message = raised
            self.steps.append({"check": ast.unparse(stmt.test), "raise": error, "message": message})
            return True
        default = none_default_step(stmt)
        if default is not None:
            self.steps.append(default)
            return True
        flag = ast.unparse(stmt.test)
        if flag in self.refused:  # the wrapper refuses it, so only the else branch runs
            for inner in stmt.orelse:
                self._prologue(inner)
            return True
        if not _plain_branches(stmt):
            return False
        # `if t: Q, K, M = a.shape else: Q, M, K = a.shape`: each branch's assignments hold
        # when it is taken; a name is kept (None when new) when the other one is
        bound = set(self.params) | {
            n.strip() for st in self.steps if "let" in st for n in st["let"].split(",")
        }
        for block, test in ((stmt.body, flag), (stmt.orelse, f"not ({flag})")):
            for inner in block:
                names = [ast.unparse(n) for n in _targets(inner.targets[0])]
                keep = ", ".join(n if n in bound else "None" for n in names)
                keep = f"({keep})" if len(names) > 1 else keep
                self.steps.append(
                    {"let": ", ".join(names), "expr": f"{ast.unparse(inner.value)} if {test} else {keep}"}
                )
                bound |= set(names)
        return True

    def _drop_listed_outputs(self) -> None:
        """An output list is allocated whole (``python.alloc``), not bound to ``[]`` as a step."""
        self.steps = [st for st in self.steps if not (st.get("let") in self.alloc and st.get("expr") == "[]")]

    def _dispatch(self, stmt: ast.stmt, condition: str, holds: str) -> None:
        """An ``if flag: helper(...) else: helper(...)``, or one helper call.

        ``condition`` selects the variant ("" for else); ``holds`` is what is true at ``stmt``.
        """
        if isinstance(stmt, ast.If):
            if condition or holds:
                raise NotThisShape(f"line {stmt.lineno}: nested launch conditions")
            test = ast.unparse(stmt.test)
            self._branch(stmt.body, test, test)
            self._branch(stmt.orelse, "", f"not ({test})")
            return
        if isinstance(stmt, ast.Assert):
            self.launch_asserts.append((stmt, holds))
            return
        call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
        helper = self._helper(call) if isinstance(call, ast.Call) else None
        if helper is None:
            raise NotThisShape(f"line {stmt.lineno}: cannot follow `{ast.unparse(stmt).splitlines()[0]}`")
        variant = search_variant(self, helper, call, condition)
        self.variants.append(variant)

    def _branch(self, body: list[ast.stmt], condition: str, holds: str) -> None:
        """One side of the launch condition: a direct launch with fixed sizes, or helper calls."""
        fixed = fixed_variant(self, body, condition, holds)
        if fixed is not None:
            self.variants.append(fixed)
            return
        for inner in body:
            self._dispatch(inner, condition, holds)


def _defaults(fn: ast.FunctionDef) -> dict[str, str]:
    """Each parameter of ``fn`` that has a default, with the default as written."""
    positional = fn.args.posonlyargs + fn.args.args
    pairs = list(zip(positional[len(positional) - len(fn.args.defaults) :], fn.args.defaults))
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None]
    return {a.arg: ast.unparse(d) for a, d in pairs}


def _targets(target: ast.expr) -> list[ast.expr]:
    return list(target.elts) if isinstance(target, ast.Tuple) else [target]


def _plain_branches(stmt: ast.If) -> bool:
    """Both branches are plain assignments to names (or tuples of names)."""
    blocks = (stmt.body, stmt.orelse)
    return all(blocks) and all(
        isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and all(isinstance(n, ast.Name) for n in _targets(s.targets[0]))
        for block in blocks
        for s in block
    )
