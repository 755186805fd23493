"""The carried-over wrapper's own runtime: cuTile's host API as the cutile-rs port provides it.

Each piece is emitted only when the carried code reads it (``infer.model.known`` names them). A
kernel object stands for each ``@ct.kernel`` the code launches, so the reference's own spellings
(a kernel held in a local, chosen by a conditional expression, retuned with ``replace_hints``,
cached in a dict) all work as written: they are values, not shapes to recognise.
"""

from __future__ import annotations

from bot.emit import carried_autograd
from bot.plan.sweep import SWEEP_LIMIT

KERNEL_CLASS = "_RsKernel"
LAUNCH = "_rs_launch"
FFI_CALL = "_rs_ffi_call"

KERNEL = f'''
class {KERNEL_CLASS}:
    """A cuTile kernel of the reference as this port launches it: the launcher of the kernel.rs
    entry that ports it (None: kernel.rs ports no entry for it) and the hints it is compiled with."""

    def __init__(self, name, launcher, hints=None):
        self.name = name
        self.launcher = launcher
        self.hints = dict(hints or {{}})

    def replace_hints(self, **hints):
        return {KERNEL_CLASS}(self.name, self.launcher, {{**self.hints, **hints}})


def {LAUNCH}(stream, grid, kernel, args, **site):
    """The reference's ct.launch: the kernel's entry launched on the grid with its arguments
    (``site``: the launch's own locals that kernel.rs takes beside them)."""
    if kernel.launcher is None:
        raise NotImplementedError(
            f"cutile-rs {{_KERNEL}}: the reference's launch through {{kernel.name}} (when it is reached) is not ported"
        )
    grid = tuple(map(int, grid)) if isinstance(grid, (tuple, list)) else (int(grid),)
    kernel.launcher(grid + (1,) * (3 - len(grid)), args, kernel.hints, stream, site)
'''

SEARCH = "_rs_exhaustive_search"


def search_piece(passes_site: bool) -> str:
    """The runtime's search; ``passes_site``: a search site of the reference passes locals kernel.rs
    takes beside the arguments (``_rs_site``), which each launch it makes passes along."""
    site_param = "*, _rs_site=None, " if passes_site else ""
    site_args = ", **(_rs_site or {})" if passes_site else ""
    return f'''
def _rs_exhaustive_search(search_space, stream, grid_fn, kernel, args_fn, hints_fn=None, {site_param}**_options):
    """cuTile's exhaustive search as the cutile-rs autotuner runs it: the configs (at most the sweep
    limit of them, ``_rs_sweep``) launched and timed, the fastest returned as ``result.best.config``."""
    configs = list(search_space)
    if not configs:
        raise ValueError(f"cutile-rs {{_KERNEL}}: an empty autotune search space for {{kernel.name}}")
    configs = configs[:1] if is_autotune_disabled() else _rs_sweep(configs)

    def run(cfg):
        tuned = kernel.replace_hints(**hints_fn(cfg)) if hints_fn is not None else kernel
        {LAUNCH}(stream, grid_fn(cfg), tuned, args_fn(cfg){site_args})

    key = (tuple(_rs_tuning_key(a) for a in args_fn(configs[0])), tuple(repr(c) for c in configs))
    tuned = autotune_launch(kernel_fn=run, configs=configs, key=key, kernel_name=kernel.name)
    return SimpleNamespace(best=SimpleNamespace(config=tuned.best_config))


def _rs_sweep(configs, limit={SWEEP_LIMIT}):
    """At most ``limit`` configs, each compiled on first use: the reference's first, then every
    field value once, then every pair of values of two fields, then its order; kept in its order."""
    distinct = []
    for cfg in configs:
        if repr(cfg) not in map(repr, distinct):
            distinct.append(cfg)

    def values(cfg):
        fields = vars(cfg) if hasattr(cfg, "__dict__") else (cfg if isinstance(cfg, dict) else {{}})
        return sorted((str(k), repr(v)) for k, v in fields.items())

    singles = [set(values(c)) for c in distinct]
    pairs = [{{(a, b) for i, a in enumerate(v) for b in v[i + 1 :]}} for v in map(values, distinct)]
    kept = [0]
    for grain in (singles, pairs):
        seen = set().union(*(grain[i] for i in kept))
        while len(kept) < min(limit, len(distinct)):
            gain, best = max((len(grain[i] - seen), -i) for i in range(len(distinct)) if i not in kept)
            if gain == 0:
                break
            kept.append(-best)
            seen |= grain[-best]
    kept += [i for i in range(len(distinct)) if i not in kept][: max(0, limit - len(kept))]
    return [distinct[i] for i in sorted(kept)]


def _rs_tuning_key(value):
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride()), str(value.dtype))
    return repr(value)
'''


PIECES = {
    carried_autograd.FORWARD: carried_autograd.PIECE,
    "_rs_cdiv": """
def _rs_cdiv(a, b):
    return -(-a // b)
""",
    "_rs_compiler_timeout": '''
def _rs_compiler_timeout(*_args, **_kwargs):
    """cutile-rs compiles on first launch, with no timeout to set."""
    return contextlib.nullcontext()
''',
    "_rs_replace_hints": """
def _rs_replace_hints(kernel, **hints):
    return kernel.replace_hints(**hints)
""",
    SEARCH: search_piece(passes_site=False),
}

# what each piece needs imported
NEEDS = {
    "_rs_compiler_timeout": ["import contextlib"],
    "_rs_exhaustive_search": [
        "from types import SimpleNamespace",
        "from tilegym.backend.cutile_rs.autotuner import autotune_launch",
        "AUTOTUNE_SWITCH",
    ],
}

# TileGym's one public switch (TILEGYM_DISABLE_AUTOTUNE=1); a checkout older than it tunes
AUTOTUNE_SWITCH = """
try:
    from tilegym.autotune import is_autotune_disabled
except ImportError:

    def is_autotune_disabled():
        return False
"""
