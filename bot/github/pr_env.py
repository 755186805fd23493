"""The environment PR code runs in: an allow-list of what a build and a test need, nothing else.

A block-list by name misses credentials with unguessable names (``GH_PAT``, ``HF_HUB_AUTH``,
``NPM_AUTH``, ``GIT_CONFIG_VALUE_0``, ``SSH_AUTH_SOCK``, ``KUBECONFIG``), so the port job keeps
only the variables below and drops every other one; a kept name that still looks secret
(``CUDA_TOKEN``) is dropped too.
"""

from __future__ import annotations

from bot.github.redact import is_secret_name

KEEP_NAMES = frozenset(
    {
        # the process and the shell
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "HOSTNAME", "TERM", "TZ", "TMPDIR",
        "LANG", "LANGUAGE",
        # the C and Rust toolchains (bindgen, cargo, rustup)
        "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "PKG_CONFIG_PATH", "LIBCLANG_PATH",
        "CC", "CXX", "AR", "CFLAGS", "CXXFLAGS", "LDFLAGS",
        "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "CARGO_TARGET_DIR", "CARGO_BUILD_JOBS",
        "CARGO_INCREMENTAL", "CARGO_NET_OFFLINE", "RUSTFLAGS",
        # Python
        "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        # agent-d's own settings that the port reads
        "AGENT_D_READER", "AGENT_D_CACHE", "AGENT_D_BUILD_TIMEOUT", "XDG_CACHE_HOME",
        # what agent-d's dry-run plugin reads inside the checkout's pytest (bot/dryrun/plugin.py)
        "AGENT_D_DRYRUN_OUT", "AGENT_D_DRYRUN_CASES", "AGENT_D_DRYRUN_TESTS", "AGENT_D_DRYRUN_MAX_CASES",
    }
)  # fmt: skip
# GPU, CUDA and TileGym runtime settings
KEEP_PREFIXES = (
    "CUDA_",
    "NVIDIA_",
    "CUTILE_",
    "TILEGYM_",
    "LC_",
    "TORCH_",
    "TRITON_",
    "NCCL_",
    "OMP_",
    "PYTORCH_",
)


def kept(name: str) -> bool:
    """Whether PR code may see the variable ``name``."""
    if is_secret_name(name):
        return False
    return name in KEEP_NAMES or name.startswith(KEEP_PREFIXES)
