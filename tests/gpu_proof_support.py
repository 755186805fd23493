"""Shared by the tests of scripts/gpu_proof.py: small archives and sample data (conftest puts scripts/ on sys.path)."""

from __future__ import annotations

import io
import random
import tarfile
from pathlib import Path


def random_file(path: Path, size: int, seed: int = 1) -> Path:
    rnd = random.Random(seed)
    path.write_bytes(rnd.randbytes(size))
    return path


def tar_xz(path: Path, top: str, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:xz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


MANIFEST = {
    "tilegym_commit": "75a14307776188ff0baf451cd9b9fc9fa3a87233",
    "ops": {
        "silu_and_mul": {
            "pytest_args": [
                "tests/ops/test_silu_and_mul.py",
                "-k",
                "(cutile_rs or cutile-rs) and (test_op)",
                "--tb=short",
                "-v",
                "-x",
                "--timeout=60",
            ],
            "pack": {"status": "generated", "reason": ""},
        },
        "matmul": {
            "pytest_args": [
                "tests/ops/test_matmul.py",
                "-k",
                "(cutile_rs or cutile-rs) and (test_op)",
                "--tb=short",
                "-v",
                "-x",
                "--timeout=60",
            ],
            "pack": {
                "status": "blocked",
                "reason": "no host pattern",
                "port_verdict": "BLOCKED",
                "port_class": "host",
            },
        },
    },
}


PYTEST_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.5, pluggy-1.5.0 -- /usr/bin/python3
rootdir: /tmp/agent-d-gpu/root/payload/agent_d
plugins: timeout-2.3.1
collected 120 items / 100 deselected / 20 selected

tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-512-dtype0] PASSED [  5%]
tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-1024-dtype1] SKIPPED [ 10%]
tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-2048-dtype2] FAILED [ 15%]

=================================== FAILURES ===================================
E   AssertionError: Tensor-likes are not close!
=========================== short test summary info ============================
FAILED tests/ops/test_silu_and_mul.py::Test_SiLUAndMul::test_op[cutile-rs-8-512-2048-dtype2] - AssertionError: Tensor-likes are not close!
!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!
============ 1 failed, 1 passed, 1 skipped, 100 deselected in 12.34s ============
"""


RESULTS = {
    "date": "2026-12-02",
    "time_utc": "2026-12-02T12:00:00Z",
    "packed": "2026-12-02T11:30:00Z",
    "tilegym_commit": "75a14307776188ff0baf451cd9b9fc9fa3a87233",
    "agent_d_commit": "c5ecff6",
    "device": "NVIDIA H200 (sm_90)",
    "driver": "580.159.04",
    "torch": "2.11.0+cu130",
    "ops": {
        "silu_and_mul": {
            "pack": {"status": "generated", "reason": ""},
            "hand_written": {
                "passed": 33,
                "failed": 1,
                "skipped": 0,
                "exit": 1,
                "timed_out": False,
                "first_failure": "FAILED tests/ops/test_silu_and_mul.py::T::test_op[x] - boom",
            },
            "agent_d": {
                "passed": 33,
                "failed": 1,
                "skipped": 0,
                "exit": 1,
                "timed_out": False,
                "first_failure": "FAILED tests/ops/test_silu_and_mul.py::T::test_op[x] - boom",
                "verdict": {"verdict": "FAIL", "class": "kernel", "reason": "1 test failed"},
                "compared": [
                    {
                        "test": "tests/ops/test_silu_and_mul.py::T::test_op[x]",
                        "outcome": "FAILED",
                        "hand_written": "FAILED",
                        "mark": "also fails with hand-written code",
                    }
                ],
            },
            "host_time": {
                "agent_d": {"us_per_call": 24.0},
                "hand_written": {"us_per_call": 20.0},
                "ratio": 1.2,
            },
        },
        "bmm": {
            "pack": {
                "status": "blocked",
                "reason": "bmm: no host pattern for this kernel yet",
                "port_verdict": "BLOCKED",
                "port_class": "host",
            },
            "hand_written": {
                "passed": 10,
                "failed": 0,
                "skipped": 2,
                "exit": 0,
                "timed_out": False,
                "first_failure": "",
            },
        },
    },
}
