#!/usr/bin/env bash
# Set up agent-d on a Debian-like machine. The README, CI (.ci/run) and the GPU image (Dockerfile)
# all install through this script. Idempotent; safe to run again.
#
#   scripts/setup.sh                agent-d from this checkout (editable), the kernel reader in crate/target
#   scripts/setup.sh --test         and the test dependencies (pytest, the linters, actionlint; torch and
#                                   cuda-tile in $AGENT_D_CACHE/dry-run-venv for the dry run's tests)
#   scripts/setup.sh --no-editable  agent-d copied into the active Python (a venv, the image), the kernel
#                                   reader installed beside the `agent-d` script
#   scripts/setup.sh --gpu          and torch for CUDA 13.0, pytest, and the CUDA tile toolchain from PyPI
#                                   wheels laid out as a CUDA_HOME in $AGENT_D_TILE_HOME (default:
#                                   PREFIX/cuda-tile); TORCH_SPEC, TORCH_INDEX, TILE_TOOLCHAIN override
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0
want_gpu=0
editable=1
for arg in "$@"; do
  case "$arg" in
    --test) want_tests=1 ;;
    --gpu) want_gpu=1 ;;
    --no-editable) editable=0 ;;
    -h | --help)
      sed -n '2,12p' "$0" | cut -c3-
      exit 0
      ;;
    *)
      echo "[setup] unknown option $arg: see scripts/setup.sh --help" >&2
      exit 2
      ;;
  esac
done
TORCH_SPEC="${TORCH_SPEC:-torch==2.11.*}"
TORCH_INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cu130}"
TILE_TOOLCHAIN="${TILE_TOOLCHAIN:-13.4.92}"
pip_install() { python3 -m pip install --quiet --disable-pip-version-check "$@"; }

have_libclang() {
  [ -n "${LIBCLANG_PATH:-}" ] && return 0
  # libclang itself: libclang-cpp alone does not do for bindgen
  local dir name
  for dir in /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu; do
    for name in 'libclang.so*' 'libclang-[0-9]*.so*'; do
      compgen -G "$dir/$name" >/dev/null && return 0
    done
  done
  return 1
}
if ! have_libclang; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "[setup] installing libclang-dev (Debian)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
  else
    echo "[setup] libclang not found: install libclang-dev (or set LIBCLANG_PATH)" >&2
    exit 1
  fi
fi
# bubblewrap: the sandbox PR code runs in (bot/sandbox.py, port-job's default; its tests need it)
if ! command -v bwrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "[setup] installing bubblewrap (Debian)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "[setup] bwrap not found: install bubblewrap for the sandbox of PR code (port-job --sandbox)" >&2
  fi
fi
command -v cargo >/dev/null || { echo "[setup] cargo not found: install a Rust toolchain (1.89+)" >&2; exit 1; }
if ! command -v rustfmt >/dev/null; then
  # `apply` formats the generated ffi.rs: a port without rustfmt cannot finish
  command -v rustup >/dev/null || { echo "[setup] rustfmt not found: install it with your Rust toolchain" >&2; exit 1; }
  rustup component add rustfmt
fi

# Where pip puts console scripts for this Python (a venv's bin/); the kernel reader goes beside them.
scripts_dir="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"

if [ "$want_gpu" = 1 ]; then
  echo "[setup] torch ($TORCH_SPEC from $TORCH_INDEX) and the CUDA tile toolchain $TILE_TOOLCHAIN (PyPI wheels)"
  pip_install "$TORCH_SPEC" --index-url "$TORCH_INDEX"
  pip_install "cffi>=1.17" "pytest>=8" "pytest-timeout>=2.3" "numpy>=2" \
    "nvidia-cuda-tileiras==$TILE_TOOLCHAIN" "nvidia-nvvm==$TILE_TOOLCHAIN" \
    "nvidia-cuda-nvcc==$TILE_TOOLCHAIN" "nvidia-nvjitlink==$TILE_TOOLCHAIN" \
    "nvidia-cuda-runtime==$TILE_TOOLCHAIN" "nvidia-curand>=10.3"
  site="$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  scripts/tile_home.sh "$site" "${AGENT_D_TILE_HOME:-$(dirname "$scripts_dir")/cuda-tile}"
fi

package="."
[ "$want_tests" = 1 ] && package=".[test]"
if [ "$editable" = 1 ]; then
  pip_install -e "$package"
  # The kernel reader (crate/) is built once here so the first run does not pay for it.
  cargo build --release --locked --quiet --manifest-path crate/Cargo.toml
else
  pip_install "$package"
  # An installed agent-d has no crate/ beside it: it finds the kernel reader on PATH, next to itself.
  # `cargo install --path` builds in crate/target (or $CARGO_TARGET_DIR), so a second run is quick.
  cargo install --locked --quiet --force --path crate --root "$(dirname "$scripts_dir")"
  [ -x "$scripts_dir/kernel-reader" ] || { echo "[setup] kernel-reader missing in $scripts_dir" >&2; exit 1; }
fi

if [ "$want_tests" = 1 ]; then
  # The launch dry run's tests (tests/test_dry_run.py) need torch and cuda.tile, which import and record
  # launches on a CPU. They go into a venv of their own so the suite's interpreter stays torch-free
  # (its tests of "torch missing" must stay true). PyPI's torch brings its CUDA libraries (~5 GB).
  dry_venv="${AGENT_D_DRYRUN_VENV:-${AGENT_D_CACHE:-$HOME/.cache/agent-d}/dry-run-venv}"
  if ! "$dry_venv/bin/python" -c 'import torch, cuda.tile, pytest, cffi' 2>/dev/null; then
    echo "[setup] torch and cuda-tile for the dry run's tests in $dry_venv"
    python3 -m venv "$dry_venv"
    "$dry_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "$TORCH_SPEC" "cuda-tile==1.7.0" "numpy>=2" "pytest>=8" "pytest-timeout>=2.3" "cffi>=1.17"
  fi
  # actionlint comes from the Go module proxy (its PyPI wrapper downloads from GitHub).
  if ! command -v actionlint >/dev/null && [ ! -x "$(go env GOPATH 2>/dev/null)/bin/actionlint" ]; then
    command -v go >/dev/null || { echo "[setup] go not found: needed to install actionlint" >&2; exit 1; }
    go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
  fi
fi

"$scripts_dir/agent-d" --help >/dev/null
if command -v agent-d >/dev/null; then
  echo "[setup] ready: $(command -v agent-d)"
else
  echo "[setup] ready: $scripts_dir/agent-d (add $scripts_dir to PATH)"
fi
