"""The table of callables the reference's host code may use, by qualified name, and what the
carried-over wrapper uses instead.

cuTile's host API becomes the wrapper's own small runtime (``bot/emit/carried_runtime.py``): a
launch goes to the kernel.rs entry that ports the kernel, autotuning to the cutile-rs autotuner.
TileGym's cuTile helpers become their cutile-rs runtime twins. The wrapper never imports the
cuTile backend: a name of ``cuda.tile`` or ``tilegym.ops.cutile`` that is not in this table is
refused by name, never carried.
"""

from __future__ import annotations

from dataclasses import dataclass

CUDA_TILE = "cuda.tile"
CUTILE_BACKEND = "tilegym.ops.cutile"

# cuTile host API -> the wrapper runtime's name for it
RUNTIME = {
    "cuda.tile.launch": "_rs_launch",
    "cuda.tile.cdiv": "_rs_cdiv",
    "cuda.tile.compiler_timeout": "_rs_compiler_timeout",
    "cuda.tile.tune.exhaustive_search": "_rs_exhaustive_search",
    "tilegym.ops.cutile.utils.cached_replace_hints": "_rs_replace_hints",
}

# a TileGym cuTile helper -> (module, name) of its cutile-rs runtime twin
TWINS = {
    "tilegym.ops.cutile.utils.next_power_of_2": ("tilegym.backend.cutile_rs.utils", "next_power_of_2"),
}

# cuTile's dtypes, read on the host (a dtype map, a comparison): torch's of the same name
_DTYPES = (
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool_",
)


@dataclass(frozen=True)
class Use:
    """What the wrapper writes for one qualified name the reference reads."""

    kind: str  # "runtime" | "import" | "torch" | "keep" | "refuse"
    text: str = ""  # runtime: its name; import: "module:name"; torch: the expression; refuse: why


def resolve(qualified: str) -> Use:
    """The wrapper's counterpart of a qualified name read by the reference's host code."""
    if qualified in RUNTIME:
        return Use("runtime", RUNTIME[qualified])
    if qualified in TWINS:
        module, name = TWINS[qualified]
        return Use("import", f"{module}:{name}")
    if qualified.startswith(CUDA_TILE + "."):
        attr = qualified[len(CUDA_TILE) + 1 :]
        if attr in _DTYPES:
            return Use("torch", "torch.bool" if attr == "bool_" else f"torch.{attr}")
        return Use(
            "refuse", f"`{qualified}` is cuTile host API with no cutile-rs counterpart in agent-d's table"
        )
    if qualified == CUDA_TILE:
        return Use("refuse", "the host code reads the `cuda.tile` module itself")
    if qualified == CUTILE_BACKEND or qualified.startswith(CUTILE_BACKEND + "."):
        return Use(
            "refuse", f"`{qualified}` belongs to the cuTile backend, which a cutile-rs wrapper never imports"
        )
    return Use("keep")
