# GPU runner image for agent-d's untrusted port job: CUDA 13 + the 13.4 tile toolchain,
# Rust (edition 2024), libclang for bindgen, Python with torch/pytest/cffi, and agent-d.
# Build:  docker build -t agent-d-gpu .
# The job runs it with `--gpus all`; nothing here holds a credential.
# The base is pinned by its manifest-list digest (every architecture's image): a tag can be moved,
# a digest cannot. To move to a newer CUDA image, take the new digest from
# `docker buildx imagetools inspect nvidia/cuda:<tag>` and change both together.
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92
FROM ${CUDA_IMAGE}

ARG RUST_TOOLCHAIN=1.89.0
# read by scripts/setup.sh --gpu
ARG TILE_TOOLCHAIN=13.4.92
ARG TORCH_SPEC="torch==2.11.*"
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu130

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    CARGO_HOME=/opt/cargo \
    RUSTUP_HOME=/opt/rustup \
    VIRTUAL_ENV=/opt/agent-d/venv \
    AGENT_D_TILE_HOME=/opt/cuda-tile

# Build tools, git, libclang (bindgen in cuda-bindings), bubblewrap (the sandbox of PR code),
# Python. Versions come from the pinned base image's Ubuntu release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential ca-certificates curl git libclang-dev clang pkg-config bubblewrap \
        python3 python3-venv python3-dev binutils xz-utils \
    && rm -rf /var/lib/apt/lists/*

# Rust through rustup, pinned toolchain, minimal profile plus rustfmt (apply formats ffi.rs with it).
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
        | sh -s -- -y --no-modify-path --profile minimal --component rustfmt \
            --default-toolchain "${RUST_TOOLCHAIN}" \
    && chmod -R a+rX /opt/cargo /opt/rustup
ENV PATH=/opt/cargo/bin:${VIRTUAL_ENV}/bin:${PATH}

# Pre-fetch the cutile crates (=0.2.0) so the port job builds without reaching crates.io.
RUN mkdir -p /tmp/warm/src && touch /tmp/warm/src/lib.rs \
    && printf '%s\n' '[package]' 'name = "warm"' 'version = "0.0.0"' 'edition = "2024"' \
        '[dependencies]' 'cutile = "=0.2.0"' 'cutile-compiler = "=0.2.0"' 'cutile-macro = "=0.2.0"' \
        'cuda-core = "=0.2.0"' 'cuda-async = "=0.2.0"' > /tmp/warm/Cargo.toml \
    && cargo fetch --manifest-path /tmp/warm/Cargo.toml \
    && rm -rf /tmp/warm

# agent-d through the README's install script (tests/test_install_path.py runs the same path in CI):
# torch, pytest and the tile toolchain wheels laid out in AGENT_D_TILE_HOME (--gpu), agent-d
# copied into the venv and the kernel reader beside it (--no-editable); rustfmt is checked.
# /agent-d-cache and /agent-d-seed are where the workflow mounts the runner's cargo cache volumes
# (docs/github.md, "Warm runners"): docker gives a new volume the owner of the folder it is mounted on.
COPY pyproject.toml README.md /opt/agent-d/src/
COPY bot /opt/agent-d/src/bot
COPY crate /opt/agent-d/src/crate
COPY scripts/setup.sh scripts/tile_home.sh /opt/agent-d/src/scripts/
RUN python3 -m venv "${VIRTUAL_ENV}" \
    && /opt/agent-d/src/scripts/setup.sh --gpu --no-editable \
    && rm -rf /opt/agent-d/src/crate/target /opt/agent-d/src/build \
    && test -x /opt/cuda-tile/bin/tileiras && command -v kernel-reader && rustfmt --version \
    && chmod -R a+rwX /opt/cargo \
    && useradd --create-home --uid 1001 runner \
    && install -d -o runner -g runner /agent-d-cache /agent-d-seed
ENV CUDA_HOME=/opt/cuda-tile \
    CUDA_TOOLKIT_PATH=/opt/cuda-tile \
    CUTILE_TILEIRAS_PATH=/opt/cuda-tile/bin/tileiras \
    LD_LIBRARY_PATH=/opt/cuda-tile/lib:/usr/local/cuda/lib64 \
    PATH=/opt/cuda-tile/bin:${PATH}
USER 1001
WORKDIR /home/runner
ENTRYPOINT []
CMD ["agent-d", "--help"]
