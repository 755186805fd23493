#!/usr/bin/env bash
# Build the GPU image from this checkout and port the demo inside it: the image's install path,
# end to end, where a docker daemon exists (CI has none: tests/test_install_path.py runs the same
# install script in a venv instead).
#   scripts/image_demo.sh [TAG]
# With NVIDIA's container runtime the demo gets the GPU and must end ALL_PASS; without it, the
# verdict must be BLOCKED (env) for want of a GPU, and nothing else may have failed.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-agent-d-gpu:local}"

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  echo "[image] no docker daemon here: run this where \`docker info\` works" >&2
  exit 2
fi
docker build -t "$tag" .

gpus=()
expect="silu_and_mul: BLOCKED (block_class: env)"
if docker info --format '{{json .Runtimes}}' | grep -q nvidia; then
  gpus=(--gpus all)
  expect="VERDICT: ALL_PASS"
fi
out="$(docker run --rm "${gpus[@]}" "$tag" agent-d demo --workdir /home/runner/demo 2>&1)"
printf '%s\n' "$out"
if ! grep -qF "$expect" <<<"$out"; then
  echo "[image] expected \"$expect\" from the demo in $tag" >&2
  exit 1
fi
echo "[image] $tag ports the demo: $expect"
