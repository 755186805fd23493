"""Compare what the kernel would receive from the cuTile reference and from agent-d's port.

The plugin (``plugin.py``) recorded, per test case, the reference's ``ct.launch`` calls (the grid,
each argument by position) and the C call of the generated wrapper (descriptors and scalars). The
C call is taken through the launch plan as ``ffi.rs`` would take it (``port_side.py``) and set
beside the reference's launch of the same case:

- the grid, term by term;
- tensors: each kernel.rs tensor matched to the reference's argument holding the same data (an
  input: the tests seed their inputs, so both runs hold equal bytes), the rest (outputs) to one of
  the same dtype and extent, else in order;
  then the dtype, and the shape and strides (same rank) or the element count;
- scalars and const generics: each must equal one and the same quantity of the reference's launch
  in every case (a scalar argument, a tensor's dimension, stride or size, a grid term): which one
  is learned from the cases, so no name of kernel.rs needs to match the reference's.

A reference launch that hands its kernel lists of tensors, against a port that launches once per
element (``python.per_element``), is compared element by element: the reference's launch is read
as one launch per element (the g-th tensor of each list in the list's place, every other argument
and the grid as they are) and paired with the port's g-th C call. What that cannot compare is
said in the report's notes: the reference runs every element in one grid.

A difference carries both values. Nothing here knows an op by name.
"""

from __future__ import annotations

import difflib
import math

from bot.dryrun.port_side import EvalError, PortLaunch, port_launches
from bot.dryrun.result import KERNEL_DTYPE, DryRun, Row
from bot.errors import UNPORTED_PATH
from bot.plan.common import TORCH_DTYPES
from bot.plan.types import LaunchPlan
from bot.read.types import KernelSignature


def compare(
    plan: LaunchPlan, signature: KernelSignature, cases: dict[str, dict], reference_module: str = ""
) -> DryRun:
    """``cases``: the plugin's records, nodeid -> {backend, case, launches, error}.

    A test that runs several ops (test_moe: moe_align_block's launches, then the fused GEMM's)
    records every op's launches: only this op's are compared, the C calls of its symbol and the
    launches of its reference's module (``reference_module``; '' keeps them all): of its kernels,
    or made from its code (a helper module's kernel, flash_decode's split-k reduce).
    A case that calls the op more than once (test_moe's two GEMMs) pairs its launches in order:
    the port's k-th launch with the reference's k-th."""
    pairs: dict[str, dict[str, dict]] = {}
    for nodeid, record in cases.items():
        pairs.setdefault(record["case"], {})[record["backend"]] = {**record, "nodeid": nodeid}
    run = DryRun("compared")
    learned: list[tuple[str, list[tuple[PortLaunch, dict]]]] = []
    for _case, sides in sorted(pairs.items()):
        ref, port = sides.get("cutile"), sides.get("cutile-rs")
        if ref is None or port is None:
            continue
        label = port["nodeid"].rsplit("::", 1)[-1]  # the cutile-rs test as pytest names it
        ref_launches = [x for x in ref["launches"] if _of_module(x, reference_module)]
        if not ref_launches:
            run.skipped.append(
                f"{label}: the reference did not launch on the CPU ({ref['error'] or 'no launch'})"
            )
            continue
        another = _another_ops_call(plan, ref_launches, port)
        if another:
            run.skipped.append(f"{label}: {another}")
            continue
        pairs_here = _case_pairs(run, plan, signature, label, ref_launches, port)
        if pairs_here is None:
            continue
        learned.append((label, pairs_here))
        run.launches += [(label, launch) for launch, _ref in pairs_here]
        for mine, theirs in pairs_here:
            run.rows += _grid_rows(label, mine, theirs, _grid_stride(signature, mine.entry))
            run.rows += _tensor_rows(label, mine, theirs)
            run.rows += _declared_rows(label, plan, signature, mine)
    run.rows += _scalar_rows(learned)
    if not run.cases:
        run.status = "not compared"
        run.why = "; ".join(run.skipped) or "no test case runs both the cuTile and the cutile-rs backend"
    return run


def _another_ops_call(plan: LaunchPlan, ref_launches: list[dict], port: dict) -> str:
    """Why a case is another op's ("" when it is this op's): the reference launched only kernels
    the carried code of this op never launches (a test class beside the op's own
    that calls a sibling op, dispatched to another backend where cutile-rs registers none), and the
    port made no C call. A case the op's own code reaches is compared, whatever its error."""
    if plan.carry is None or any(x.get("side") == "cutile-rs" for x in port["launches"]):
        return ""
    own = {k.name for k in plan.carry.kernels}  # ported or not: an unported one's launch raises, named
    launched = sorted({x["kernel"] for x in ref_launches})
    if any(name in own for name in launched):
        return ""
    error = " ".join(port["error"].split()) or "no error"
    return (
        f"the reference launches {', '.join(launched)}, which {plan.carry.function} never launches: "
        f"the test calls another op (its cutile-rs run: {error})"
    )


def _case_pairs(
    run: DryRun,
    plan: LaunchPlan,
    signature: KernelSignature,
    label: str,
    ref_launches: list[dict],
    port: dict,
) -> list[tuple[PortLaunch, dict]] | None:
    """The case's port launches paired in order with the reference's; None, with the row or the
    skip that says why, when their counts cannot pair."""
    calls = [
        x
        for x in port["launches"]
        if x.get("side") == "cutile-rs" and x.get("symbol", plan.ffi.symbol) == plan.ffi.symbol
    ]
    launched = _port_side(run, plan, signature, label, calls, port["error"], len(ref_launches))
    if launched is None:
        return None
    per_element = bool(plan.python.per_element) or any(
        k.per_element for k in (plan.carry.kernels if plan.carry else [])
    )
    refs = ref_launches
    if per_element:
        refs = [one for launch in refs for one in per_element_launches(launch)]
        _note_per_element(run, ref_launches, len(calls))
    if len(refs) < len(launched) or (per_element and len(refs) != len(launched)):
        # per element: one C call per element of the reference's lists, no more and no fewer
        run.rows.append(Row(label, "launches", "count", str(len(refs)), str(len(launched)), False))
        return None
    if len(refs) > len(launched):
        # the port is forward-only: a test that also runs the backward pass has the reference
        # launch its backward kernels after the forward ones
        run.skipped.append(
            f"{label}: the reference's launches after the first {len(launched)} "
            f"({', '.join(r['kernel'] for r in refs[len(launched) :])}) have no cutile-rs counterpart"
        )
    return list(zip(launched, refs))


def _port_side(
    run: DryRun,
    plan: LaunchPlan,
    signature: KernelSignature,
    label: str,
    calls: list[dict],
    port_error: str,
    ref_count: int,
) -> list[PortLaunch] | None:
    """The launches the port's C calls make, read through the plan; None, with the row or the skip
    that says why, when it made no call, a call cannot be read, or the launcher refuses one."""
    if not calls and UNPORTED_PATH.search(port_error):
        # the wrapper refuses, as planned, a launch path kernel.rs has no kernels for: nothing of
        # the host to compare; the tests report the path as the kernel's gap
        run.skipped.append(f"{label}: {' '.join(port_error.split())}")
        return None
    if not calls:
        run.cases.append(label)
        run.rows.append(
            Row(label, "wrapper", "launch", f"{ref_count} launch(es)", f"no launch: {port_error}", False)
        )
        return None
    try:  # every C call of the case, in order (one per list element, or one per call of the op)
        launched_each = [port_launches(plan, signature, c["args"]) for c in calls]
    except EvalError as exc:
        run.skipped.append(f"{label}: the C call could not be read through the plan ({exc})")
        return None
    run.cases.append(label)
    refused = next((x for x in launched_each if isinstance(x, str)), None)
    if refused is not None:
        run.rows.append(Row(label, "launcher", "launch", "launches", refused, False))
        return None
    return [launch for each in launched_each for launch in each]


def _of_module(launch: dict, module: str) -> bool:
    """Whether a reference launch is ``module``'s: of one of its kernels, or made while its code was
    on the stack (a helper module's kernel it launches); a record without either: yes."""
    return not module or launch.get("module", module) == module or module in launch.get("callers", ())


def per_element_launches(launch: dict) -> list[dict]:
    """A reference launch that hands its kernel lists of tensors, as one launch per element: the
    g-th tensor of each list in the list's place (its parameter named ``As[g]``), every other
    argument and the grid unchanged. Lists of unequal length, or none: the launch as it is."""
    lists = [i for i, a in enumerate(launch["args"]) if a.get("kind") == "list"]
    lengths = {len(launch["args"][i]["items"]) for i in lists}
    if len(lengths) != 1:
        return [launch]
    params = list(launch.get("params") or [])
    out = []
    for g in range(lengths.pop()):
        args = [a["items"][g] if a.get("kind") == "list" else a for a in launch["args"]]
        names = [f"{p}[{g}]" if i in lists else p for i, p in enumerate(params)]
        out.append({**launch, "args": args, "params": names})
    return out


def _note_per_element(run: DryRun, refs: list[dict], calls: int) -> None:
    """Say once what comparing a launch over lists element by element leaves out."""
    lists = sorted(
        {
            (launch.get("params") or [])[i]
            for launch in refs
            for i, a in enumerate(launch["args"])
            if a.get("kind") == "list" and i < len(launch.get("params") or [])
        }
    )
    note = (
        f"the reference launches once over the lists {', '.join(lists) or '(none recorded)'}; the port launches "
        "once per element: compared per element are the grid, each element's dtype, shape and strides, and "
        "every scalar and const generic. Not compared: that the reference runs all elements in one grid "
        "(which program takes which element's tiles, and their order across elements)"
    )
    if not lists:
        note = f"the port launches once per list element ({calls} C calls), but the reference's launch recorded no list"
    if note not in run.notes:
        run.notes.append(note)


def _grid_stride(signature: KernelSignature, entry: str) -> bool:
    """The entry loops over its tiles with a stride of the number of blocks launched (kernel.rs's
    ``step_by(num_tile_blocks)``): any 1-D grid of at least one block covers the work."""
    found = next((e for e in signature.entries if e.name == entry), None)
    return found is not None and found.block.grid_stride


def _grid_rows(case: str, mine: PortLaunch, theirs: dict, grid_stride: bool = False) -> list[Row]:
    ref = (list(theirs["grid"]) + [1, 1, 1])[:3]
    same = ref == mine.grid
    shown = str(tuple(ref))
    if grid_stride and not same and mine.grid[1:] == [1, 1] and ref[1:] == [1, 1] and mine.grid[0] >= 1:
        same, shown = True, f"{shown} (a grid-stride loop: any number of blocks covers the work)"
    return [Row(case, f"{mine.entry} grid", "grid", shown, str(tuple(mine.grid)), same)]


def _tensor_rows(case: str, mine: PortLaunch, theirs: dict) -> list[Row]:
    ref_tensors = [(i, a) for i, a in enumerate(theirs["args"]) if a.get("kind") == "tensor"]
    names = [n for n, k in mine.kinds.items() if k in ("ten", "ptr")]
    matched: dict[str, tuple[int, dict]] = {}

    def pair(name: str, fits) -> None:
        taken = {index for index, _ in matched.values()}
        hit = next((p for p in ref_tensors if p[0] not in taken and fits(p[1])), None)
        if hit:
            matched[name] = hit

    for name in names:  # an input: the same bytes on both sides
        digest = mine.values[name].get("digest")
        pair(name, lambda ref, digest=digest: bool(digest) and ref.get("digest") == digest)
    for name in names:  # the rest (outputs, fresh memory): one of the same dtype and extent ...
        desc = mine.values[name]
        if name not in matched:
            pair(name, lambda ref, desc=desc: _same_extent(ref, desc))
    for name in names:  # ... else in order
        if name not in matched:
            pair(name, lambda ref: True)
    rows = []
    params = theirs.get("params") or []
    for name in names:
        desc = mine.values[name]
        if name not in matched:
            rows.append(Row(case, name, "tensor", "no tensor argument left", _tensor_text(desc), False))
            continue
        index, ref = matched[name]
        ref_name = params[index] if index < len(params) else f"argument {index}"
        same_rank = len(ref["shape"]) == len(desc["shape"])
        if mine.kinds[name] == "ten" and same_rank:
            fields: tuple[str, ...] = ("dtype", "shape", "strides")
        else:  # a pointer's kernel sees its element type, its extent and its memory's order
            fields = ("dtype", "numel")
            contiguous = _contiguous(ref), _contiguous(desc)
            rows.append(
                Row(
                    case,
                    name,
                    "contiguous",
                    f"{ref_name}: {contiguous[0]} (strides {tuple(ref['strides'])})",
                    f"{contiguous[1]} (strides {tuple(desc['strides'])})",
                    contiguous[0] == contiguous[1],
                )
            )
        if "storage_offset" in ref and "storage_offset" in desc:
            fields += ("storage_offset",)
        for field_name in fields:
            theirs_value, mine_value = ref[field_name], desc[field_name]
            rows.append(
                Row(
                    case,
                    name,
                    field_name,
                    f"{ref_name}: {theirs_value}",
                    str(mine_value),
                    theirs_value == mine_value,
                )
            )
    return rows


def _contiguous(desc: dict) -> bool:
    """Whether a tensor's strides are the row-major strides of its shape (a size-1 axis aside)."""
    step = 1
    for n, stride in zip(reversed(desc["shape"]), reversed(desc["strides"]), strict=True):
        if n != 1 and stride != step:
            return False
        step *= n
    return True


def _declared_rows(case: str, plan: LaunchPlan, signature: KernelSignature, mine: PortLaunch) -> list[Row]:
    """Each tensor against the element type kernel.rs declares for it: a tensor of another dtype is
    one the launcher refuses (the element generic's tensors share the dispatched dtype; a fixed
    type is that type). When the port passes what the reference passes, that is kernel.rs's to fix."""
    entry = next((e for e in signature.entries if e.name == mine.entry), None)
    if entry is None:
        return []
    ffi = plan.ffi
    generic_param = next((t.param for t in ffi.tensors if t.name == ffi.dtype_from), "")
    dispatched = (mine.values.get(generic_param) or {}).get("dtype", "") if generic_param else ""
    slots = {s.generic: TORCH_DTYPES.get(s.dtype, "") for s in ffi.type_slots if s.dtype != "dtype"}
    rows = []
    for name, kind in mine.kinds.items():
        if kind not in ("ten", "ptr"):
            continue
        elem = entry.param(name).elem
        if elem == ffi.dtype_generic and ffi.dtype_generic:
            wanted, declared = dispatched, f"{elem} (the dispatched {dispatched})"
        else:
            wanted = slots.get(elem) or TORCH_DTYPES.get(elem, "")
            declared = elem
        passed = mine.values[name].get("dtype", "")
        if wanted and passed:
            rows.append(
                Row(case, name, KERNEL_DTYPE, f"kernel.rs declares {declared}", passed, passed == wanted)
            )
    return rows


def _same_extent(ref: dict, desc: dict) -> bool:
    """Whether a reference tensor could be this one: the same dtype and shape (a pointer's: size).
    A tensor the port's earlier launch fills (expert_ids, after moe_align_block's C call, which
    the dry run does not run) holds other bytes than the reference's, but not another extent; an
    unused empty tensor of the reference (a_scale) is passed over for it."""
    if ref.get("dtype") != desc.get("dtype"):
        return False
    return ref.get("shape") == desc.get("shape") or ref.get("numel") == desc.get("numel")


def _tensor_text(desc: dict) -> str:
    return f"{desc['dtype']} {desc['shape']}"


def reference_quantities(theirs: dict) -> dict[str, float]:
    """Every number the reference's launch hands the kernel, by name."""
    params = theirs.get("params") or []
    out: dict[str, float] = {}
    for i, arg in enumerate(theirs["args"]):
        name = params[i] if i < len(params) else f"arg{i}"
        if arg.get("kind") == "scalar" and isinstance(arg.get("value"), (int, float)):
            out[name] = arg["value"]
        elif arg.get("kind") == "tensor":
            for d, n in enumerate(arg["shape"]):
                out[f"{name}.shape[{d}]"] = n
            for d, s in enumerate(arg["strides"]):
                out[f"{name}.stride({d})"] = s
            out[f"{name}.numel()"] = arg["numel"]
    for d, g in enumerate(theirs["grid"]):
        out[f"grid[{d}]"] = g
    return out


def _close(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        a, b = int(a), int(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)
    except (TypeError, ValueError):
        return False


def _scalar_rows(learned: list[tuple[str, list[tuple[PortLaunch, dict]]]]) -> list[Row]:
    """Each kernel.rs scalar and const generic against one and the same reference quantity in
    every case; a row per case for a match, a difference where no quantity fits every case."""
    rows: list[Row] = []
    if not learned:
        return rows
    launches = max(len(pairs) for _, pairs in learned)  # per element: the cases' lists may differ in length
    for k in range(launches):
        first = next(pairs[k][0] for _, pairs in learned if len(pairs) > k)
        for name, kind in first.kinds.items():
            if kind not in ("scalar", "generic"):
                continue
            values = [
                (case, pairs[k][0].values.get(name), reference_quantities(pairs[k][1]))
                for case, pairs in learned
                if len(pairs) > k and pairs[k][0].entry == first.entry  # the same variant launched
            ]
            namesake = _namesake(name, [pool for _, _, pool in values])
            if namesake is not None:  # the reference's own argument of that name is its counterpart
                tuned = [
                    pairs[k][1].get("tuned", {}).get(namesake, []) for _, pairs in learned if len(pairs) > k
                ]
                for (case, mine, pool), space in zip(values, tuned, strict=False):
                    same = _close(pool[namesake], mine) or any(_close(t, mine) for t in space)
                    told = f" (its search ranges over {', '.join(map(str, space))})" if space else ""
                    rows.append(
                        Row(case, name, "value", f"{namesake} = {pool[namesake]}{told}", str(mine), same)
                    )
                continue
            fits = set.intersection(
                *[{q for q, v in pool.items() if _close(v, mine)} for _, mine, pool in values]
            )
            if fits:  # a scalar argument of the reference before a quantity read off a tensor or the grid
                best = _nearest(name, {q for q in fits if _is_argument(q)} or fits)
                rows += [
                    Row(case, name, "value", f"{best} = {pool[best]}", str(mine), True)
                    for case, mine, pool in values
                ]
                continue
            space_of = {case: pairs[k][1].get("tuned", {}) for case, pairs in learned if len(pairs) > k}
            searched = {
                q
                for q in set.intersection(*[set(pool) for _, _, pool in values])
                if _is_argument(q)
                and all(any(_close(t, mine) for t in space_of[case].get(q, [])) for case, mine, _ in values)
            }
            if searched:  # one of the values the reference's autotuner searches for that argument
                q = _nearest(name, searched)
                space = ", ".join(map(str, space_of[values[0][0]].get(q, [])))
                rows += [
                    Row(
                        case,
                        name,
                        "value",
                        f"{q} = {pool[q]} (its search ranges over {space})",
                        str(mine),
                        True,
                    )
                    for case, mine, pool in values
                ]
                continue
            # the case where the most likely counterpart differs, with both values
            best = _nearest(name, set.union(*[set(pool) for _, _, pool in values]))
            for case, mine, pool in values:
                same = best in pool and _close(pool[best], mine)
                rows.append(Row(case, name, "value", f"{best} = {pool.get(best, '?')}", str(mine), same))
    return rows


def _namesake(name: str, pools: list[dict[str, float]]) -> str | None:
    """The reference's scalar argument named as ``name`` is (case aside) in every case, if one is."""
    found = {q for q in pools[0] if _is_argument(q) and q.lower() == name.lower()}
    found = {q for q in found if all(q in pool for pool in pools)}
    return min(found) if len(found) == 1 else None


def _is_argument(quantity: str) -> bool:
    return "." not in quantity and not quantity.startswith("grid[")


def _nearest(name: str, candidates: set[str]) -> str:
    """The candidate whose name is closest to ``name`` (ties: the shortest, then by name)."""
    key = name.lower().removesuffix("_ptr")
    return min(
        candidates,
        key=lambda q: (-difflib.SequenceMatcher(None, key, q.lower()).ratio(), len(q), q),
    )
