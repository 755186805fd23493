"""Stage "generated files": render the plan into the new files and the wired versions of existing ones."""

from __future__ import annotations

from pathlib import Path

from bot.emit import carried_py, cdef, ffi_rs, testfile_wiring, wiring, wrapper_py
from bot.emit.types import GeneratedFile, GeneratedFiles
from bot.errors import Blocked, Failed, OwnBug
from bot.plan.types import LaunchPlan
from bot.targets.checkout import Checkout
from bot.targets.types import Target

SELECTOR = Path("src/tilegym/backend/selector.py")
OPS_INIT = Path("src/tilegym/ops/__init__.py")


def _wrapper(target: Target, plan: LaunchPlan) -> str:
    """The wrapper: the reference's host code carried over (``plan.carry``), or rendered from the plan."""
    if plan.carry is None:
        return wrapper_py.render(plan)
    try:
        return carried_py.render(plan, lambda path: (target.repo / path).read_text(encoding="utf-8"))
    except carried_py.CarryError as exc:
        raise OwnBug(f"the carried wrapper could not be rendered: {exc}") from None


def generate(target: Target, plan: LaunchPlan, checkout: Checkout) -> GeneratedFiles:
    repo = target.repo
    rel = lambda p: str(p.relative_to(repo))  # noqa: E731
    ffi_text = ffi_rs.render(plan, has_rc_module=checkout.has_rc_module)
    wrapper_text = _wrapper(target, plan)
    problems = cdef.cross_check(ffi_text, cdef.render(plan.ffi))
    if problems:
        raise Failed("host", "ffi.rs and _FFI_CDEF disagree: " + "; ".join(problems))
    files = [
        GeneratedFile(rel(target.ffi_rs), ffi_text, "new"),
        GeneratedFile(rel(target.wrapper_py), wrapper_text, "new"),
    ]
    edits = [
        (checkout.lib_rs, lambda t: wiring.lib_rs(t, target.op)),
        (target.ops_dir / "__init__.py", lambda t: wiring.package_init(t, target.op)),
        (repo / OPS_INIT, wiring.ops_init),
        (repo / SELECTOR, wiring.selector),
    ]
    # a test that calls the reference's function by its module path calls the wrapper's in its
    # cutile-rs branch: the wrapper module is <op>.py, its function the registered name
    wrapper_function = f"tilegym.ops.cutile_rs.{target.op}.{plan.python.register_name}"
    # the names the wrapper's refusals read: the carried program's own, else the plan's checks
    checked = set(plan.carry.refused_by) if plan.carry is not None else wrapper_py.checked_names(plan)
    dispatched = wrapper_py.refusing_dtypes(plan)
    edits += [
        (
            repo / site.path,
            lambda t, site=site: testfile_wiring.test_backends(
                t,
                site.backward,
                dict.fromkeys(site.reference_calls, wrapper_function),
                checked,
                dispatched,
            ),
        )
        for site in checkout.test_sites
    ]
    # the tilegym helpers between a test and the op: their "cutile" branches get cutile-rs twins
    helpers: dict[str, list[str]] = {}
    for site in checkout.test_sites:
        for helper in site.helpers:
            module, function = helper.split("::")
            helpers.setdefault(module, []).append(function)
    edits += [
        (
            repo / module,
            lambda t, functions=tuple(functions): testfile_wiring.helper_backend_twins(t, functions),
        )
        for module, functions in sorted(helpers.items())
    ]
    for path, edit in edits:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current is None and path.name != "__init__.py":
            raise Blocked("host", f"cannot wire {rel(path)}: the file does not exist")
        try:
            files.append(
                GeneratedFile(rel(path), edit(current) if current is not None else edit(None), "edit")
            )
        except wiring.WiringError as exc:
            raise Blocked("host", f"cannot wire {rel(path)}: {exc}") from None
    return GeneratedFiles(files)
