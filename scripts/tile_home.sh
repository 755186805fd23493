#!/usr/bin/env bash
# Lay out the CUDA tile toolchain's PyPI wheels as one CUDA_HOME, the way a CUDA toolkit would
# have it: tileiras finds ptxas, libnvvm and nvJitLink beside it there, not inside the wheels.
#   scripts/tile_home.sh SITE_PACKAGES DEST
set -euo pipefail
[ $# = 2 ] || { echo "usage: scripts/tile_home.sh SITE_PACKAGES DEST" >&2; exit 2; }
site="$1"
dest="$2"

# the first file named $1 under the wheels' nvidia/ folder
one() {
  local found
  found="$(find "$site/nvidia" -name "$1" \( -type f -o -type l \) 2>/dev/null | sort | head -n1)"
  if [ -z "$found" ]; then
    echo "[setup] $1 not found under $site/nvidia: install the tile toolchain wheels first" >&2
    return 1
  fi
  printf '%s\n' "$found"
}

mkdir -p "$dest/bin" "$dest/lib" "$dest/nvvm/lib64" "$dest/include"
for name in tileiras ptxas; do
  path="$(one "$name")"
  ln -sf "$path" "$dest/bin/$name"
done
for name in libnvvm.so.4 libnvJitLink.so.13; do
  path="$(one "$name")"
  ln -sf "$path" "$dest/lib/$name"
done
ln -sf libnvvm.so.4 "$dest/lib/libnvvm.so"
ln -sf libnvJitLink.so.13 "$dest/lib/libnvJitLink.so"
ln -sf ../../lib/libnvvm.so.4 "$dest/nvvm/lib64/libnvvm.so.4"
ln -sf libnvvm.so.4 "$dest/nvvm/lib64/libnvvm.so"
for name in cuda.h curand.h; do
  path="$(one "$name")"
  ln -sf "$path" "$dest/include/$name"
done
[ -x "$dest/bin/tileiras" ] || { echo "[setup] $dest/bin/tileiras is not executable" >&2; exit 1; }
echo "[setup] tile toolchain in $dest: export CUDA_HOME=$dest CUTILE_TILEIRAS_PATH=$dest/bin/tileiras" \
  "LD_LIBRARY_PATH=$dest/lib PATH=$dest/bin:\$PATH"
