"""Reading an autotuned cuTile reference op (tests/fixtures/reference, written by us) into wrapper facts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.infer.facts import Facts
from bot.infer.reference import launch as reference_launch
from bot.read.types import BlockUse, Entry, Generic, KernelSignature, Param
from bot.targets.discover import discover
from bot.targets.types import Target

REFERENCE = Path(__file__).parent / "fixtures" / "reference" / "tiled_gemm.py"


def _entry(name: str, generics: list[str], params: list[str]) -> Entry:
    return Entry(
        name=name,
        unsafe=True,
        public=True,
        attr_args={},
        generics=(Generic("E", "type"), *(Generic(g, "const", "i32") for g in generics)),
        params=tuple(
            Param(p, "tensor", "E", 2) if p in ("x", "y", "z") else Param(p, "scalar", ty="i32")
            for p in params
        ),
        outputs=("z",),
        output_evidence={},
        block=BlockUse(1, name.startswith("looping")),
    )


SIGNATURE = KernelSignature(
    "tiled_gemm",
    (
        _entry("looping_gemm_kernel", ["BM", "BN", "BK", "GROUP"], ["x", "y", "z", "rows"]),
        _entry("flat_gemm_kernel", ["BM", "BN", "BK"], ["x", "y", "z"]),
    ),
)


def _read(source: str | None = None):
    return reference_launch.read(source or REFERENCE.read_text(), "tiled_gemm", SIGNATURE)


def test_variants_matched_to_entries_by_name_then_by_suffix():
    reading = _read()
    assert [(v.condition, v.kernel, v.entry) for v in reading.variants] == [
        ("looping", "_looping_gemm_kernel", "looping_gemm_kernel"),
        # `_gemm_kernel` ends both entry names; the other one is taken by `_looping_gemm_kernel`
        ("", "_gemm_kernel", "flat_gemm_kernel"),
    ]


def test_config_fields_renamed_to_generics_hints_to_compile_options_and_extras_dropped():
    looping, flat = _read().variants
    assert looping.configs == [
        ("", [{"BM": 128, "BN": 256, "BK": 64, "GROUP": 4, "NUM_CTAS": 1, "OCCUPANCY": 1}])
    ]  # PIPELINE has no generic in looping_gemm_kernel: dropped
    cap, small = flat.configs[0]
    assert cap == "_device_capability()[0] < 9"  # the generator's local `cap` resolved, asked once per device
    assert [(c["BM"], c["OCCUPANCY"]) for c in small] == [
        (32, 1),
        (32, 2),
        (64, 1),
        (64, 2),
    ]  # loops expanded
    assert flat.configs[1] == ("", [{"BM": 128, "BN": 128, "BK": 64, "NUM_CTAS": 2, "OCCUPANCY": 1}])


def test_grid_in_the_callers_names_with_integer_cdiv_and_cached_sm_count():
    looping, flat = _read().variants
    assert looping.grid0 == "min(get_num_sm() // cfg.NUM_CTAS, cdiv(rows, cfg.BM)) * cfg.OCCUPANCY"
    # the helper's `R, C = z.shape` read through the allocation torch.empty((rows, cols), ...)
    assert flat.grid0 == "cdiv(rows, cfg.BM) * cdiv(cols, cfg.BN)"


def test_prologue_refuses_what_the_kernel_cannot_do_and_keeps_the_rest():
    reading = _read()
    assert reading.steps[0] == {
        "check": "flip_x",
        "raise": "NotImplementedError",
        "message": "cutile-rs tiled_gemm: flip_x is not supported (kernel.rs has no parameter for it)",
    }
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    assert lets == [
        ("looping", "True if looping is None else looping"),
        ("rows, inner", "x.shape"),  # flip_x is refused, so only its else branch is kept
        ("inner_y, cols", "y.shape"),
    ]
    checks = [s for s in reading.steps[1:] if "check" in s]
    assert checks == [
        {
            "check": "not (inner == inner_y)",
            "raise": "ValueError",
            "message": "cutile-rs tiled_gemm: inner sizes differ",
        }
    ]  # `assert not flip_x` beside the launch is covered by the refusal
    assert reading.alloc == {"z": "torch.empty((rows, cols), device=x.device, dtype=x.dtype)"}
    assert any("PIPELINE" in n and "dropped" in n for n in reading.dropped)
    assert [n.split(":")[0] for n in reading.refused] == ["flip_x refused"]


def test_facts_offered_with_reference_sources(tmp_path):
    target = _target(tmp_path, REFERENCE.read_text())
    facts = Facts()
    reference_launch.gather(target, SIGNATURE, facts, _ref(target))
    assert facts.get("python.key") == "(rows, cols, flip_x, x.dtype, looping)"
    assert facts.get("python.args.num_programs") == (
        "(min(get_num_sm() // cfg.NUM_CTAS, cdiv(rows, cfg.BM)) * cfg.OCCUPANCY) if looping "
        "else (cdiv(rows, cfg.BM) * cdiv(cols, cfg.BN))"
    )
    whens = [g["when"] for g in facts.get("python.configs")]
    assert whens == ["(looping)", "(_device_capability()[0] < 9)", "always"]
    for key in reference_launch.KEYS:
        assert facts.source(key).kind == "reference", key
    assert "TILE_M->BM" in facts.source("python.configs").detail
    for expr in [facts.get("python.key"), facts.get("python.args.num_programs"), *whens[:-1]]:
        ast.parse(expr, mode="eval")


def test_a_kernel_rs_scalar_no_argument_feeds_is_the_reference_s_local_of_its_name(tmp_path):
    """``cols`` (bound by ``inner_y, cols = y.shape``, handed to no kernel) added to the flat entry is
    that local; ``rows``, which the reference kernel takes by name, is still the FFI's; ``Cols``,
    whose case differs, is nobody's."""
    target = _target(tmp_path, REFERENCE.read_text())
    signature = KernelSignature(
        "tiled_gemm",
        (
            SIGNATURE.entries[0],
            _entry("flat_gemm_kernel", ["BM", "BN", "BK"], ["x", "y", "z", "cols", "Cols"]),
        ),
    )
    facts = Facts()
    reference_launch.gather(target, signature, facts, _ref(target))
    assert facts.get("python.args.cols") == "cols"
    assert "tiled_gemm():73's own `cols`" in facts.source("python.args.cols").detail
    assert not facts.has("python.args.rows") and not facts.has("python.args.Cols")


def test_a_tensor_kernel_rs_does_not_name_is_no_caller_flag_to_refuse():
    """``X`` gets the caller's ``x``: when kernel.rs names its tensors otherwise, the reading stops
    there (a tensor is no flag the wrapper could refuse with ``if x: raise``)."""
    source = REFERENCE.read_text().replace(
        "TILE_K: ct.Constant[int]):\n    pass",
        "TILE_K: ct.Constant[int]):\n    t = ct.load(X, index=(0, 0), shape=(TILE_M, TILE_K))\n"
        "    ct.store(Z, index=(0, 0), tile=t)",
        1,
    )
    assert "ct.load(X" in source
    flat = _entry("flat_gemm_kernel", ["BM", "BN", "BK"], ["x", "y", "z"])
    renamed = Param("p", "tensor", "E", 2)
    flat = Entry(**{**flat.__dict__, "params": (renamed, *flat.params[1:])})
    signature = KernelSignature("tiled_gemm", (SIGNATURE.entries[0], flat))
    with pytest.raises(reference_launch.NotThisShape, match="X gets x, which kernel.rs lacks"):
        reference_launch.read(source, "tiled_gemm", signature)


def test_a_contract_still_wins(tmp_path):
    target = _target(tmp_path, REFERENCE.read_text())
    facts = Facts()
    from bot.targets.types import Source

    facts.offer("python.key", "(rows,)", Source("contract", "host_contract.yaml"))
    reference_launch.gather(target, SIGNATURE, facts, _ref(target))
    assert facts.get("python.key") == "(rows,)"


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ("yield SimpleNamespace(TILE_M=128, TILE_N=256", "yield SimpleNamespace(TILE_M=pick(), TILE_N=256"),
        ("cfg.TILE_M, cfg.TILE_N, cfg.TILE_K, cfg.GROUP", "64, cfg.TILE_N, cfg.TILE_K, cfg.GROUP"),
        (
            "(ceil(R / cfg.TILE_M) * ceil(C / cfg.TILE_N), 1, 1)",
            "(ceil(R / cfg.TILE_M), ceil(C / cfg.TILE_N), 1)",
        ),
        (
            "    stream = torch.cuda.current_stream()\n",
            "    stream = torch.cuda.current_stream()\n    log(x)\n",
        ),
        ("for occ in [1, 2]:", "for occ in 2:"),
        ("    if key not in _cache:", "    if key:"),  # no cache key: every shape would share a config
    ],
)
def test_other_shapes_are_reported_not_guessed(tmp_path, edit, why):
    source = REFERENCE.read_text()
    assert edit in source
    target = _target(tmp_path, source.replace(edit, why))
    facts = Facts()
    reference_launch.gather(target, SIGNATURE, facts, _ref(target))
    for key in reference_launch.KEYS:
        assert not facts.has(key)
        assert any("tiled_gemm.py" in t for t in facts.tried[key]), facts.tried


def test_a_returned_helper_call_is_a_launch_too():
    source = (
        REFERENCE.read_text()
        .replace(
            "    if looping:\n        _run_looping(stream, x, y, z, rows, cols, flip_x)\n"
            '    else:\n        assert not flip_x, "flip_x needs the looping kernel"\n        _run_flat(stream, x, y, z)\n    return z\n',
            "    return _run_flat(stream, x, y, z)\n",
        )
        .replace(
            "    if flip_x:\n        inner, rows = x.shape\n    else:\n        rows, inner = x.shape\n",
            "    rows, inner = x.shape\n",
        )
    )
    assert "return _run_flat" in source and "if flip_x" not in source
    reading = _read(source)
    assert [(v.condition, v.entry) for v in reading.variants] == [("", "flat_gemm_kernel")]


def test_references_without_autotuning_are_left_to_other_readers():
    source = "from tilegym.backend import register_impl\n\n@register_impl('tiled_gemm', backend='cutile')\ndef f(x):\n    return x\n"
    assert _read(source) is None


def _target(tmp_path: Path, source: str) -> Target:
    path = tmp_path / "src" / "tilegym" / "ops" / "cutile" / "tiled_gemm.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    return Target(tmp_path, "tiled_gemm")


def _ref(target: Target):
    from bot.infer.reference import op as reference

    return reference.load(target, discover(target))


def test_an_unparsable_reference_is_noted_once_not_a_crash(tmp_path):
    from bot.infer.reference import op as reference

    target = _target(tmp_path, "def tiled_gemm(:\n")
    ref = reference.load(target, discover(target))
    assert ref.tree is None and ref.problem.startswith("does not parse")
    facts = Facts()
    reference.gather(target, facts, ref)
    reference_launch.gather(target, SIGNATURE, facts, ref)
    assert facts.tried == {"python.out_cols": [f"{ref.rel} ({ref.problem})"]}


def test_nested_tuning_helpers_a_direct_branch_and_shapes_through_a_flag():
    """bmm's shape (tests/fixtures/reference/batched_gemm.py): nested ``def args_fn/grid_fn``, a branch
    that launches directly with fixed sizes, ``TM`` ~ ``BM``, sizes the FFI derives (``rt_m``)."""
    source = (REFERENCE.parent / "batched_gemm.py").read_text()

    def entry(name: str, generics: list[str], sizes: list[str]) -> Entry:
        tensors = tuple(Param(p, "tensor", "E", 3) for p in ("a", "b", "c"))
        return Entry(
            name=name,
            unsafe=True,
            public=True,
            attr_args={},
            generics=(Generic("E", "type"), *(Generic(g, "const", "i32") for g in generics)),
            params=tensors + tuple(Param(p, "scalar", ty="i32") for p in sizes),
            outputs=("c",),
            output_evidence={},
            block=BlockUse(1 if sizes else 3, bool(sizes)),
        )

    signature = KernelSignature(
        "batched_gemm",
        (
            entry(
                "static_persistent_gemm_kernel",
                ["BM", "BN", "BK", "GROUP_SIZE_M", "TRANSPOSE_A"],
                ["rt_q", "rt_m", "rt_n", "rt_k"],
            ),
            entry("non_persistent_gemm_kernel", ["BM", "BN", "BK"], []),
        ),
    )
    source = source.replace("_looping_kernel", "_static_persistent_gemm_kernel")
    source = source.replace("_flat_kernel", "_non_persistent_gemm_kernel")
    reading = reference_launch.read(source, "batched_gemm", signature)
    persistent, flat = reading.variants
    assert (persistent.condition, flat.condition) == ("persistent", "")
    assert persistent.values == {"trans_a": "int(bool(transpose_a))"}  # a generic the caller's flag feeds
    assert reading.checks == [{"when": "trans_a != 0 and trans_a != 1", "rc": "INVALID_ARGS"}]
    # the grid_fn's locals are substituted; its getattr fields are renamed with the config
    assert "getattr(cfg, 'NUM_CTAS', 1)" in persistent.grid0 and "get_num_sm()" in persistent.grid0
    assert persistent.key == ["Q", "M", "N", "K", "transpose_a", "a.dtype"]
    # the direct branch: its defaults are the one config, its grid follows the config launched
    assert flat.configs == [("", [{"BM": 128, "BN": 64, "BK": 32}])]
    assert flat.grid_xyz == ["cdiv(M, cfg.BM)", "cdiv(N, cfg.BN)", "Q"]
    assert any("overrides from the caller not taken" in n for n in reading.dropped)
    # shapes read through the flag: each branch's assignment holds when it is taken
    lets = [(s["let"], s["expr"]) for s in reading.steps if "let" in s]
    assert ("Q, K, M", "a.shape if transpose_a else (None, None, None)") in lets
    assert ("Q, M, K", "a.shape if not (transpose_a) else (Q, M, K)") in lets
    checks = [s["check"] for s in reading.steps if "check" in s]
    assert "not (K == K_B)" in checks and "(not (persistent)) and not (not transpose_a)" in checks


def test_a_keyword_parameter_the_declaration_lacks_is_read_from_its_kwargs():
    """The registered ``f(xs, flip=False)`` under a declaration ``f(xs, **kwargs)``: ``flip`` is
    ``kwargs.get('flip', False)``; a declared one, or a declaration without ``**kwargs``, adds nothing."""
    keywords = {"flip": "False", "scale": "1.0"}
    assert reference_launch.kwargs_steps(keywords, "xs, scale=2.0, **kw") == [
        {"let": "flip", "expr": "kw.get('flip', False)"}
    ]
    assert reference_launch.kwargs_steps(keywords, "xs, flip=False, scale=1.0") == []
    assert reference_launch.kwargs_steps(keywords, None) == []
