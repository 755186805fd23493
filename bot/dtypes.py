"""The element types that cross the C ABI: one table, every other list derived from it
(docs/specification.md, "The C ABI").

Each row: cutile's name (what ffi.rs dispatches on and a contract writes), the ``TensorDesc``
dtype code, the torch dtype the wrapper hands over, and whether cutile-rs takes it from
``cuda_core`` (the byte-sized float types) rather than ``cutile::half``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dtype:
    name: str
    code: int
    torch: str
    byte: bool = False  # f8/f4: imported from cuda_core by ffi.rs
    packed: bool = False  # two values per byte: no scalar or accumulator is of this type


TABLE = (
    Dtype("f32", 0, "float32"),
    Dtype("f16", 1, "float16"),
    Dtype("bf16", 2, "bfloat16"),
    Dtype("i32", 3, "int32"),
    Dtype("i64", 4, "int64"),
    Dtype("f8e5m2", 5, "float8_e5m2", byte=True),
    Dtype("f4e2m1fnx2", 6, "uint8", byte=True, packed=True),  # fp4 pairs, packed in a torch.uint8
    Dtype("f8e4m3fn", 7, "float8_e4m3fn", byte=True),
)

NAMES = tuple(d.name for d in TABLE)
CODES = {d.name: d.code for d in TABLE}
TORCH = {d.name: d.torch for d in TABLE}  # cutile name -> torch dtype name
FROM_TORCH = {d.torch: d.name for d in TABLE}
BYTE_TYPES = frozenset(d.name for d in TABLE if d.byte)
FP8_FROM_TORCH = {d.torch: d.name for d in TABLE if d.byte and not d.packed}
DEFAULT = ("f32", "f16", "bf16")  # what TileGym's kernels dispatch unless their tests pass more
UNPACKED = tuple(d.name for d in TABLE if not d.packed)  # a type slot's or a scalar's possible types
