"""The registered function flattened into wrapper steps, on the way to its launches.

Callees are inlined (their parameters bound by ``let`` steps; after a launch, the names a callee
would rebind are numbered), the control flow a wrapper can say is kept, each ``ct.launch`` is
recorded in order, and assignments after the last launch only shape what the wrapper returns.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable
from dataclasses import dataclass

from bot.infer.direct.autotune import (
    ConfigChoice,
    configs_calls,
    switch_name,
    untuned_branch,
)
from bot.infer.direct.flatten_ast import (
    is_list_value,
    none_of,
    passed_through,
    renamed,
    simple_block,
    wrapper_expr,
)
from bot.infer.direct.flatten_configs import ConfigSteps
from bot.infer.direct.module import MAX_INLINE, ReferenceModule, is_launch
from bot.infer.direct.paths import entry_key, launch_path, not_ported
from bot.infer.direct.statements import (
    conditional_value,
    early_return,
    first_line,
    host_value,
    if_chain,
    in_place_call,
    inlinable_call,
    is_dropped,
    item_assignment,
    post_branch,
    raise_check,
    raised,
    replaced_item,
    same_names,
)
from bot.infer.launch.syntax import NotThisShape, assert_step, none_default_step
from bot.infer.syntax import bind, plain_assign, substitute

# calls that make a tensor without reading any tensor's data
_ALLOCATORS = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like"}


@dataclass
class Launch:
    """A ``ct.launch`` the flattening reached, in the order it runs."""

    call: ast.Call
    kernel: ast.FunctionDef | None  # the @ct.kernel function the call launches
    module: ReferenceModule
    where: str  # its line, with the file when a callee of another module launches it
    steps_before: int = 0  # how many wrapper steps run before it

    @property
    def kernel_name(self) -> str:
        """The launched kernel's name; as written in the call when it is not a module function."""
        return self.kernel.name if self.kernel is not None else ast.unparse(self.call.args[2])


class Flattener(ConfigSteps):
    """The statements on the way to the launch, as wrapper steps, with callees inlined."""

    def __init__(self, module: ReferenceModule, op: str, params: list[str], entries: Iterable[str] = ()):
        self.module = self.root = module
        self.op = op
        self.entries = {entry_key(e) for e in entries}  # kernel.rs's entries, to pick a launch path by
        self.bound = set(params)  # names with a value at this point of the wrapper
        self.kernel_vars: dict[str, ast.expr] = {}  # `kernel = _select(...)`: the tuned kernel object
        self.steps: list[dict[str, str]] = []
        self.local: dict[str, ast.expr] = {}  # name -> value, for reading the launch's tuples
        self.launches: list[Launch] = []
        self.result: ast.expr | None = None
        # autotuning: the module generator(s) of the configs, the name of the one config launched,
        # names computed from it (kept out of the steps: the wrapper has them per config)
        self.generator: ConfigChoice | None = None
        self.choices: dict[str, ConfigChoice] = {}  # `_fn = _a if cap[0] < 9 else _b`: name -> choice
        self.config_lists: set[str] = set()
        self.config_var = ""
        self.per_config: dict[str, ast.expr] = {}
        self.key = ""
        self.switches: dict[str, str] = {}  # `enable = is_autotune_enabled()`: name -> that switch
        self.lists: set[str] = set()  # names bound to a list here (`shape = list(x.shape)`)

    def walk(self, fn: ast.FunctionDef, depth: int) -> ast.expr | None:
        """Steps for ``fn``'s body; returns what ``fn`` returns after its launches.

        Once ``fn`` has launched, what follows may only launch again (a call that reaches another
        ``ct.launch``, as flash_decode's reduction) or return: the wrapper's steps all run before
        the C call, so nothing may be computed from what a launch wrote."""
        return self._block(fn.body, depth, len(self.launches), {})[1]

    def _block(
        self, body: list[ast.stmt], depth: int, launched: int, post: dict[str, ast.expr]
    ) -> tuple[bool, ast.expr | None]:
        """(whether the block returned, what it returned); ``launched``: launches before the function."""
        returned: ast.expr | None = None
        for at, stmt in enumerate(body):
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) or is_dropped(stmt):
                continue  # docstring, autograd bookkeeping
            after = len(self.launches) > launched
            if isinstance(stmt, ast.Return) and after:
                returned = substitute(stmt.value, {}, post) if stmt.value is not None else None
                return True, returned
            untuned = untuned_branch(stmt, self.switches)
            if untuned is not None:
                # `if is_autotune_disabled(): <launch the first config> else: <search>`: the wrapper
                # autotunes over the same configs itself, so the launch of one config is what it says
                self._tuned_key(body[at:])  # the tuning side: its else, or what follows an early return
                done, value = self._block(untuned, depth, launched, post)
                if done:
                    return True, value
                continue
            if after and self._fresh_allocation(stmt, post):
                # `o = torch.empty(..)` between two launches reads no launch's data: the wrapper
                # allocates it before the C call, as every other output
                self._statement(stmt)
                continue
            if after and plain_assign(stmt) and not self._reaches_any(stmt.value):
                # `y = out.view(shape)` after the launch: part of what the wrapper returns
                post[stmt.targets[0].id] = substitute(stmt.value, {}, post)
                continue
            if after and post_branch(stmt, post):
                continue  # `if keepdim: y = y.unsqueeze(dim)` after the launch, the same
            if isinstance(stmt, ast.Expr) and is_launch(stmt.value):
                self._promote(stmt.value, post)
                self._record(stmt.value)
                continue
            path = self._launch_path(stmt) if isinstance(stmt, ast.If) and not after else None
            if path is not None:  # the branch that launches kernel.rs's kernels; the others now raise
                done, value = self._block(path, depth, launched, post)
                if done:
                    return True, value
                continue
            call = inlinable_call(stmt)
            if call is not None and self._reaches_launch(call):
                done, value = self._inlined_statement(stmt, call, depth, post)
                if done:
                    return True, value
                continue
            if after:
                raise NotThisShape(f"line {stmt.lineno}: `{first_line(stmt)}` after the launch")
            self._statement(stmt)
        return False, returned

    def _inlined_statement(
        self, stmt: ast.stmt, call: ast.Call, depth: int, post: dict[str, ast.expr]
    ) -> tuple[bool, ast.expr | None]:
        """A statement whose ``call`` reaches a launch, the callee's body inlined: (whether the
        statement returned, what it returned)."""
        self._promote(call, post)
        if depth >= MAX_INLINE:
            raise NotThisShape(f"line {stmt.lineno}: the launch is deeper than {MAX_INLINE} calls")
        before = len(self.launches)
        value = self._inline(call, depth)
        if isinstance(stmt, ast.Return):
            return True, value
        if isinstance(stmt, ast.Assign) and value is not None:
            if len(self.launches) > before and not same_names(stmt.targets[0], value):
                # a value the callee returns after its launch: the wrapper's steps all run
                # before the launch, so it can only be part of what the wrapper returns
                if not plain_assign(stmt):
                    raise NotThisShape(
                        f"line {stmt.lineno}: `{first_line(stmt)}` is computed after the launch"
                    )
                post[stmt.targets[0].id] = value
            if len(self.launches) == before:
                self._let(stmt.targets[0], value)
        return False, None

    def _promote(self, call: ast.Call, post: dict[str, ast.expr]) -> None:
        """A name assigned after an earlier launch that this launch reads (``num_experts_pow2 =
        next_power_of_2(num_experts)`` between two stages) is a wrapper step when its value is
        host arithmetic: it reads nothing a launch wrote, so computing it before the C call, where
        every step runs, gives the same value."""
        for name in sorted({n.id for n in ast.walk(call) if isinstance(n, ast.Name)} & set(post)):
            if host_value(post[name]):
                self._let(ast.Name(name, ast.Store()), post.pop(name))

    def _record(self, call: ast.Call) -> None:
        name = getattr(call.args[2], "id", "")
        kernel = self.kernel_vars.get(name) or self.module.functions.get(name)
        where = str(call.lineno) if self.module is self.root else f"{self.module.rel}:{call.lineno}"
        self.launches.append(Launch(call, kernel, self.module, where, len(self.steps)))

    def _fresh_allocation(self, stmt: ast.stmt, post: dict[str, ast.expr]) -> bool:
        """``name = torch.empty(..)`` (or another allocator) of a name not bound yet, from no value
        computed after a launch: running it before the launches changes nothing."""
        if not (plain_assign(stmt) and stmt.targets[0].id not in self.bound):
            return False
        value = stmt.value
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and ast.unparse(value.func.value) == "torch"
            and value.func.attr in _ALLOCATORS
        ):
            return False
        return not any(isinstance(n, ast.Name) and n.id in post for n in ast.walk(value))

    def _reaches_any(self, value: ast.expr) -> bool:
        return any(
            isinstance(n, ast.Call) and (is_launch(n) or self._reaches_launch(n)) for n in ast.walk(value)
        )

    def _reaches_launch(self, call: ast.Call) -> bool:
        target = self.module.resolve(call)
        return target is not None and target[2].launches(target[0])

    def _inline(self, call: ast.Call, depth: int) -> ast.expr | None:
        callee, skip, home = self.module.resolve(call)
        renames: dict[str, str] = {}
        if self.launches:
            # a later launch's callee must not rebind a name an earlier launch reads (a parameter
            # handed the caller's variable of the same name is that variable)
            callee, renames = renamed(callee, self.bound, passed_through(callee, call, skip))
        params = [a.arg for a in callee.args.posonlyargs + callee.args.args][skip:]
        defaults = dict(zip(reversed(params), reversed(callee.args.defaults), strict=False))
        given = dict(zip(params, call.args, strict=False))
        given.update({renames.get(k.arg, k.arg): k.value for k in call.keywords if k.arg})
        given = {k: v for k, v in given.items() if k in params}
        for param in params:
            value = given.get(param, defaults.get(param))
            if value is None:
                raise NotThisShape(f"line {call.lineno}: {callee.name}() gets no value for {param}")
            if not (isinstance(value, ast.Name) and value.id == param):
                self._let(ast.Name(param, ast.Store()), value)
            self.bound.add(param)
        caller, kernel_vars = self.module, self.kernel_vars
        self.module, self.kernel_vars = home, kernel_vars if home is caller else {}
        try:
            return self.walk(callee, depth + 1)
        finally:
            self.module, self.kernel_vars = caller, kernel_vars

    def _statement(self, stmt: ast.stmt) -> None:
        """One statement before the launches, as wrapper steps; anything else is not this shape."""
        item = item_assignment(stmt)
        if item is not None:  # `shape[dim] = shape[dim] // 2` on a list: the list with that item
            self._set_item(stmt, *item)
            return
        if (
            isinstance(stmt, ast.AugAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id in self.bound
        ):
            name = stmt.target.id  # `n *= k`: n = n * k
            value = ast.BinOp(left=ast.Name(name, ast.Load()), op=stmt.op, right=stmt.value)
            self._let(ast.Name(name, ast.Store()), ast.copy_location(value, stmt))
            return
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            self._assign(stmt.targets[0], stmt.value)
            return
        if isinstance(stmt, ast.Assert):
            self.steps.append(assert_step(stmt, "", self.op))
            return
        if self.module.log_call(stmt):
            return  # a log line: the launch reads nothing it writes
        in_place = in_place_call(stmt, self.bound)
        if in_place is not None:  # `sorted_ids.fill_(n)`: sorted_ids = sorted_ids.fill_(n)
            self._let(ast.Name(in_place.func.value.id, ast.Store()), in_place)
            return
        if isinstance(stmt, ast.If) and self._if(stmt):
            return
        raise NotThisShape(f"line {stmt.lineno}: cannot follow `{first_line(stmt)}`")

    def _assign(self, target: ast.expr, value: ast.expr) -> None:
        """``target = value``: a step, unless it is the stream, a config, an autotune switch or the
        choice of a kernel, which the wrapper does its own way."""
        if "current_stream" in ast.unparse(value):
            return  # the wrapper launches on the stream of the tensors' device itself
        if self._config_statement(target, value):
            return
        switch = switch_name(value)
        if switch and isinstance(target, ast.Name):
            self.switches[target.id] = switch
            return
        kernel = self.module.kernel_behind(value)
        if kernel is not None and isinstance(target, ast.Name):
            # `kernel = _select_rope_kernel(...)`: autotuning picks compile hints; the
            # launcher takes the kernel itself, so the wrapper needs no such step
            self.kernel_vars[target.id] = kernel
            return
        self._let(target, value)

    def _if(self, stmt: ast.If) -> bool:
        """An ``if`` before the launches as a check, an early return, a default, a conditional
        value, a guarded block or a chain of them; False when it is none of these."""
        raised = raise_check(stmt)
        if raised is not None:  # `if N > MAX: raise RuntimeError("...")`: the same check
            error, message = raised
            self.steps.append({"check": self.expr(stmt.test), "raise": error, "message": message})
            return True
        early = early_return(stmt)
        if isinstance(early, ast.Call) and self._reaches_launch(early):
            # `if use_autotune: return _tuned(...)`: another launch path of the op; the wrapper
            # ports the one after it and says so when a caller asks for the other
            self._not_ported(stmt.test, f"{ast.unparse(early.func)}()")
            return True
        if early is not None:
            self.steps.append({"return": self.expr(early), "when": self.expr(stmt.test)})
            return True
        default = none_default_step(stmt)
        if default is not None:
            self.steps.append(default)
            return True
        branches = conditional_value(stmt)
        if branches is not None:
            target, yes, no = branches
            self._let(ast.Name(target, ast.Store()), ast.IfExp(test=stmt.test, body=yes, orelse=no))
            return True
        return self._guarded_block(stmt) or self._if_chain(stmt)

    def _not_ported(self, test: ast.expr, through: str) -> None:
        """A check raising NotImplementedError when ``test`` holds: a launch path not ported."""
        self.steps.append(
            {
                "check": self.expr(test),
                "raise": "NotImplementedError",
                "message": not_ported(self.op, through, test),
            }
        )

    def _launch_path(self, stmt: ast.If) -> list[ast.stmt] | None:
        """The block of the branch that launches kernel.rs's kernels (``paths.launch_path``), each
        other branch's refusal a check step before it; None when ``stmt`` is no choice of paths."""
        found = launch_path(stmt, self.entries, self.module, self.op)
        if found is None:
            return None
        block, refusals = found
        for test, error, message in refusals:
            self.steps.append({"check": self.expr(test), "raise": error, "message": message})
        return block

    def _set_item(self, stmt: ast.stmt, name: str, index: ast.expr, item: ast.expr) -> None:
        """``name[index] = item`` on a list the steps built (``shape = list(x.shape)``)."""
        if name not in self.lists:
            raise NotThisShape(
                f"line {stmt.lineno}: cannot assign to `{first_line(stmt)}` (not a list built here)"
            )
        self._let(ast.Name(name, ast.Store()), ast.copy_location(replaced_item(name, index, item), stmt))
        self.lists.add(name)

    def _if_chain(self, stmt: ast.If) -> bool:
        """``if a: .. elif b: .. else: ..`` whose branches assign (as a guarded block's do) or raise:
        each test is read once, in order, and only when no earlier one held (a flag per test); a
        raising branch is the same check, an assignment keeps its name's value when its branch is
        not taken."""
        branches = if_chain(stmt)
        if not all(block and (raised(block) or simple_block(block)) for _, block in branches):
            return False
        flags: list[ast.expr] = []
        conditions: list[ast.expr] = []
        for node, _ in branches:
            earlier = none_of(flags)
            if node is None:
                conditions.append(earlier)
                continue
            test = node.test if earlier is None else ast.BoolOp(op=ast.And(), values=[earlier, node.test])
            flag = f"_branch_{node.lineno}"
            self._let(ast.Name(flag, ast.Store()), ast.copy_location(test, node))
            flags.append(ast.Name(flag, ast.Load()))
            conditions.append(ast.Name(flag, ast.Load()))
        for (_, block), condition in zip(branches, conditions, strict=True):
            error = raised(block)
            if error is not None:
                self.steps.append({"check": self.expr(condition), "raise": error[0], "message": error[1]})
            else:
                self._branch(block, condition)
        return True

    def _guarded_block(self, stmt: ast.If) -> bool:
        """``if c: ... [else: ...]`` over plain assignments and asserts: each assignment keeps the
        name's value when its branch is not taken (``None`` for a name the branch introduces), each
        assert holds under its branch's condition."""
        body = [s for s in stmt.body if not is_dropped(s)]
        orelse = [s for s in stmt.orelse if not is_dropped(s)]
        if not body or not simple_block(body) or not simple_block(orelse):
            return False
        test = stmt.test
        nested_else = any(isinstance(n, ast.If) and n.orelse for s in body + orelse for n in ast.walk(s))
        if nested_else or sum(isinstance(s, (ast.Assign, ast.If)) for s in body + orelse) > 1:
            # the branch is decided once: a later assignment must not see an earlier one's effect
            flag = ast.Name(f"_branch_{stmt.lineno}", ast.Store())
            self._let(flag, stmt.test)
            test = ast.Name(flag.id, ast.Load())
        self._branch(body, test)
        if orelse:
            self._branch(orelse, ast.UnaryOp(op=ast.Not(), operand=test))
        return True

    def _branch(self, block: list[ast.stmt], test: ast.expr) -> None:
        condition = self.expr(test)
        for s in block:
            if isinstance(s, ast.If):  # taken when both hold; the outer test is read first
                both = ast.BoolOp(op=ast.And(), values=[test, s.test])
                error = raised(s.body)
                if error is not None:  # `if bad: raise E(..)` inside: the same check, under both
                    self.steps.append({"check": self.expr(both), "raise": error[0], "message": error[1]})
                elif s.orelse:  # decided once, before either side assigns what the test reads
                    flag = f"_branch_{s.lineno}"
                    self._let(ast.Name(flag, ast.Store()), both)
                    both = ast.Name(flag, ast.Load())
                    self._branch(s.body, both)
                else:
                    self._branch(s.body, both)
                if s.orelse:
                    taken = both if error is None else s.test
                    other = ast.BoolOp(op=ast.And(), values=[test, ast.UnaryOp(op=ast.Not(), operand=taken)])
                    self._branch(s.orelse, other)
                continue
            if isinstance(s, ast.Assert):
                self.steps.append(assert_step(s, condition, self.op))
                continue
            name = s.targets[0].id
            keep = ast.Name(name, ast.Load()) if name in self.bound else ast.Constant(None)
            self._let(ast.Name(name, ast.Store()), ast.IfExp(test=test, body=s.value, orelse=keep))

    def _let(self, target: ast.expr, value: ast.expr) -> None:
        if not isinstance(target, (ast.Name, ast.Tuple)):
            raise NotThisShape(f"line {value.lineno}: cannot assign to `{ast.unparse(target)}`")
        if isinstance(target, ast.Name) and self._per_config(value):
            self.per_config[target.id] = substitute(value, {}, self.per_config)
            bind(target, value, self.local)
            return
        value = self._inline_helpers(value)
        bind(target, value, self.local)
        if isinstance(target, ast.Name):
            (self.lists.add if is_list_value(value) else self.lists.discard)(target.id)
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        self.bound |= {ast.unparse(n) for n in names}
        self.steps.append({"let": ", ".join(ast.unparse(n) for n in names), "expr": self.expr(value)})

    def _inline_helpers(self, value: ast.expr) -> ast.expr:
        module, bound = self.module, self.bound

        class Inline(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                inlined = module.pure_helper(node)
                return inlined if inlined is not None else node

            def visit_Name(self, node: ast.Name) -> ast.AST:
                const = module.constants.get(node.id)
                if const is not None:
                    return copy.deepcopy(const)
                full = module.torch_aliases.get(node.id)
                if full is not None and node.id not in bound:  # `F.pad` -> `torch.nn.functional.pad`
                    return ast.copy_location(ast.parse(full, mode="eval").body, node)
                return node

        return Inline().visit(copy.deepcopy(value))

    def expr(self, node: ast.expr) -> str:
        node = substitute(node, {}, self.per_config) if self.per_config else node
        node, generator = configs_calls(self.module.functions, node, self.choices)
        if generator is not None:  # `max(c.TILE_N for c in _gen(d))`: over the wrapper's configs
            self._use_configs(generator, node)
        return ast.unparse(wrapper_expr(self._inline_helpers(node)))
