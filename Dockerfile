# GPU runner image for agent-d's untrusted port job: CUDA 13 + the 13.4 tile toolchain,
# Rust (edition 2024), libclang for bindgen, Python with torch/pytest/cffi, and agent-d.
# Build:  docker build -t agent-d-gpu .
# The job runs it with `--gpus all`; nothing here holds a credential.
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04
FROM ${CUDA_IMAGE}

ARG RUST_TOOLCHAIN=1.89.0
ARG TILE_TOOLCHAIN=13.4.92
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu130

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    CARGO_HOME=/opt/cargo \
    RUSTUP_HOME=/opt/rustup \
    VIRTUAL_ENV=/opt/agent-d/venv

# Build tools, git, libclang (bindgen in cuda-bindings), Python. Versions come from the
# pinned base image's Ubuntu release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential ca-certificates curl git libclang-dev clang pkg-config \
        python3 python3-venv python3-dev binutils xz-utils \
    && rm -rf /var/lib/apt/lists/*

# Rust through rustup, pinned toolchain, minimal profile plus rustfmt (apply formats ffi.rs with it).
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
        | sh -s -- -y --no-modify-path --profile minimal --component rustfmt \
            --default-toolchain "${RUST_TOOLCHAIN}" \
    && chmod -R a+rX /opt/cargo /opt/rustup
ENV PATH=/opt/cargo/bin:${VIRTUAL_ENV}/bin:${PATH}

# Python side: torch for the tests, cffi for the wrappers, the 13.4 tile toolchain wheels.
RUN python3 -m venv "${VIRTUAL_ENV}" \
    && pip install "torch==2.11.*" --index-url "${TORCH_INDEX}" \
    && pip install "cffi>=1.17" "pytest>=8" "pytest-timeout>=2.3" "numpy>=2" \
        "nvidia-cuda-tileiras==${TILE_TOOLCHAIN}" "nvidia-nvvm==${TILE_TOOLCHAIN}" \
        "nvidia-cuda-nvcc==${TILE_TOOLCHAIN}" "nvidia-nvjitlink==${TILE_TOOLCHAIN}" \
        "nvidia-cuda-runtime==${TILE_TOOLCHAIN}" "nvidia-curand>=10.3"

# One CUDA_HOME for the tile toolchain (tileiras needs ptxas, libnvvm and nvJitLink beside it).
RUN site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && mkdir -p /opt/cuda-tile/bin /opt/cuda-tile/lib /opt/cuda-tile/nvvm/lib64 /opt/cuda-tile/include \
    && for f in tileiras ptxas; do ln -sf "$(find "$site/nvidia" -type f -name "$f" | head -n1)" /opt/cuda-tile/bin/; done \
    && for f in libnvvm.so.4 libnvJitLink.so.13; do ln -sf "$(find "$site/nvidia" -name "$f" | head -n1)" /opt/cuda-tile/lib/; done \
    && ln -sf /opt/cuda-tile/lib/libnvvm.so.4 /opt/cuda-tile/nvvm/lib64/libnvvm.so.4 \
    && ln -sf /opt/cuda-tile/lib/libnvvm.so.4 /opt/cuda-tile/nvvm/lib64/libnvvm.so \
    && find "$site/nvidia" \( -name cuda.h -o -name curand.h \) -exec ln -sf {} /opt/cuda-tile/include/ \; \
    && test -x /opt/cuda-tile/bin/tileiras
ENV CUDA_HOME=/opt/cuda-tile \
    CUDA_TOOLKIT_PATH=/opt/cuda-tile \
    CUTILE_TILEIRAS_PATH=/opt/cuda-tile/bin/tileiras \
    LD_LIBRARY_PATH=/opt/cuda-tile/lib:/usr/local/cuda/lib64 \
    PATH=/opt/cuda-tile/bin:${PATH}

# Pre-fetch the cutile crates (=0.2.0) so the port job builds without reaching crates.io.
RUN mkdir -p /tmp/warm/src && touch /tmp/warm/src/lib.rs \
    && printf '%s\n' '[package]' 'name = "warm"' 'version = "0.0.0"' 'edition = "2024"' \
        '[dependencies]' 'cutile = "=0.2.0"' 'cutile-compiler = "=0.2.0"' 'cutile-macro = "=0.2.0"' \
        'cuda-core = "=0.2.0"' 'cuda-async = "=0.2.0"' > /tmp/warm/Cargo.toml \
    && cargo fetch --manifest-path /tmp/warm/Cargo.toml \
    && rm -rf /tmp/warm && chmod -R a+rwX /opt/cargo

# agent-d itself (the GPU job runs `agent-d port-job`).
COPY pyproject.toml README.md /opt/agent-d/src/
COPY bot /opt/agent-d/src/bot
COPY crate /opt/agent-d/src/crate
# The installed package has no crate/ beside it: it finds the kernel reader on PATH.
RUN pip install /opt/agent-d/src \
    && cargo install --locked --path /opt/agent-d/src/crate --root /usr/local \
    && test -x /usr/local/bin/kernel-reader && rustfmt --version \
    && useradd --create-home --uid 1001 runner
USER 1001
WORKDIR /home/runner
ENTRYPOINT []
CMD ["agent-d", "--help"]
