"""The typed values of the read stage: the kernel's signature.

Mirrors the JSON printed by crate/ (docs/reader-schema.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Generic:
    name: str
    kind: str  # "type" | "const"
    ty: str = ""  # const generics: "i32", "bool", ...
    bounds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor" | "ptr" | "partition" | "scalar"
    elem: str = ""  # tensor/ptr/partition element type: a generic name ("E") or a concrete type ("i32")
    rank: int | None = None  # tensors only
    ty: str = ""  # scalars only: "i32", "f32", ...
    mutable: bool = False  # "&mut Tensor", "*mut", or a *Mut partition type
    partition_type: str = ""  # partitions only: the type as written ("MappedPartitionMut<E, {[B]}, M>")


@dataclass(frozen=True)
class BlockUse:
    """How an entry reads its block id: the facts, not a pattern name."""

    axes: int  # how many block-id axes the body uses (0..3)
    grid_stride: bool  # a `step_by(<num tile blocks>)` loop over tiles
    evidence: str = ""


@dataclass(frozen=True)
class Entry:
    name: str
    unsafe: bool
    public: bool
    attr_args: dict[str, str]
    generics: tuple[Generic, ...]
    params: tuple[Param, ...]
    outputs: tuple[str, ...]
    output_evidence: dict[str, str]
    block: BlockUse
    line: int = 0

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class FileUse:
    """A name a top-level ``use`` of kernel.rs brings into the scope ffi.rs shares (``*``: a glob)."""

    name: str
    path: str  # "cuda_core::Stream"; a glob's path before ``::*``
    glob: bool = False
    line: int = 0


@dataclass(frozen=True)
class KernelSignature:
    module: str
    entries: tuple[Entry, ...]
    path: str = ""
    file_uses: tuple[FileUse, ...] = ()
