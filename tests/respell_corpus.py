"""A corpus of cuTile reference modules re-spelled: the same host code, written another way.

agent-d reads an op's cuTile reference (``tilegym/ops/cutile/<op>.py``) to learn how it launches
its kernels. Each kind below rewrites the reference's host code (functions not decorated
``@ct.kernel`` and not called by a kernel, classes, module-level code) deterministically, with the
``ast`` module, into a module that behaves exactly as the original, so that a reader that depends
on one spelling shows up:

- ``grid_helper``: a launch's grid (or the value its grid name is assigned) computed by a new
  module-level ``_grid_of(<the names it reads>)``;
- ``grid_list``: a grid tuple built as a list, then ``tuple(...)``;
- ``conditional_expr`` / ``conditional_stmt``: an if/else pair of one assignment (or return)
  each as one conditional expression, and the reverse;
- ``renamed_locals``: every local of the host functions renamed ``v0``, ``v1``...;
- ``inlined_locals`` / ``hoisted``: a local read once put into its use; a launch argument's call
  or arithmetic put into a new local;
- ``args_tuple``: a launch's argument tuple built first into ``launch_args``;
- ``nested_launch`` / ``method_launch``: a launch made by a nested ``def _go()``, or by a
  module-level class's ``@staticmethod run(stream, grid, kernel, args)``;
- ``tuple_assign``: two independent assignments in a row as one ``a, b = x, y``;
- ``early_return``: ``if c: return X`` then the rest, the rest moved into an ``else:`` (or the
  reverse);
- ``prod_spelling``: ``math.prod(s)`` <-> ``functools.reduce(operator.mul, s, 1)``,
  ``x.numel()`` -> ``math.prod(x.shape)``, a product of ints ``a * b`` -> ``math.prod((a, b))``;
- ``alias_import``: ``import cuda.tile as ct`` spelled ``as tile_lang``, every use renamed.

Kernels, and the plain functions they call, are left as they are: a top-level one keeps its
source text byte for byte (``alias_import`` alone renames the cuda.tile alias in them).

A rewrite keeps Python's semantics: the order in which side effects happen, and scoping. Where
it moves an evaluation, it moves only expressions built from names, constants, operators and
calls with no side effect (:data:`PURE_CALLS`; :data:`PURE_METHODS`, tensor methods, taken by
name); where a site is not plainly safe (a closure or an exception handler could see a name
bound at another time, a call may change what an expression reads), it is skipped. Each kind is
a function ``module_source -> new_source | None`` (None: no site of that kind in the module),
listed in :data:`KINDS`; :func:`respellings` gives every kind that applied, with ``all``, every
kind one after the other (but ``conditional_stmt``, which would undo ``conditional_expr``).

Not re-spelled: ``x.flatten()`` <-> ``x.reshape(-1)`` (the same for a torch tensor, not for a
NumPy array, and the receiver's type is not known from the text).

The code is split along those stages under ``tests/respell/``: ``model.py`` (the module as the
rewrites read it, scopes, side effects), ``launch_kinds.py`` and ``spelling_kinds.py`` (the
kinds), ``corpus.py`` (the kinds by name, the references), ``record.py`` (the recorder). This
module gathers what the tests use.

At the end, :func:`record`: a module and its re-spellings run on a CPU with every ``ct.launch``
recorded, in the interpreter that has torch and cuda.tile (this module imports only the standard
library). Nothing of TileGym is kept here: the references are read from the wheel at test time.
"""

from __future__ import annotations

from respell.corpus import (
    ALL,
    KINDS,
    REWRITES,
    corpus_ops,
    every_kind,
    find_reference,
    kernel_dumps,
    reference_files,
    registered_functions,
    respellings,
    table,
)
from respell.launch_kinds import grid_list
from respell.model import HELD_OUT, REFERENCES, Module
from respell.record import record

__all__ = [
    "ALL",
    "HELD_OUT",
    "KINDS",
    "Module",
    "REFERENCES",
    "REWRITES",
    "corpus_ops",
    "every_kind",
    "find_reference",
    "grid_list",
    "kernel_dumps",
    "record",
    "reference_files",
    "registered_functions",
    "respellings",
    "table",
]
