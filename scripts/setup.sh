#!/usr/bin/env bash
# Set up agent-d on a fresh Debian-like machine: libclang (bindgen needs it), the Python package,
# and with --test the test dependencies. Idempotent; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0
[ "${1:-}" = "--test" ] && want_tests=1

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
command -v cargo >/dev/null || { echo "[setup] cargo not found: install a Rust toolchain (1.89+)" >&2; exit 1; }
command -v rustfmt >/dev/null || { echo "[setup] rustfmt not found: rustup component add rustfmt" >&2; exit 1; }

if [ "$want_tests" = 1 ]; then
  python3 -m pip install --quiet --disable-pip-version-check -e ".[test]"
  # actionlint comes from the Go module proxy (its PyPI wrapper downloads from GitHub).
  if ! command -v actionlint >/dev/null && [ ! -x "$(go env GOPATH 2>/dev/null)/bin/actionlint" ]; then
    command -v go >/dev/null || { echo "[setup] go not found: needed to install actionlint" >&2; exit 1; }
    go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
  fi
else
  python3 -m pip install --quiet --disable-pip-version-check -e .
fi
# The kernel reader (crate/) is built once here so the first run does not pay for it.
cargo build --release --locked --quiet --manifest-path crate/Cargo.toml
echo "[setup] ready: $(command -v agent-d)"
