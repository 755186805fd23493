"""The checkout's own validator script: found, run with the right environment, bounded in time,
shielded from its nm/grep pipe race, and (opt-in) agreeing with our built-in validator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from validator_support import (
    FFI_EXPLICIT,
    FFI_MACROS,
    OP,
    WRAPPER,
    build_so,
    make_port,
    needs_cc,
)

from bot.report import validator as V

# --------------------------------------------------------------------------- the repo's own script


def _fake_script(repo: Path, body: str, under: str = ".agents/skills") -> Path:
    path = repo / under / V.SKILL / "scripts" / "validate_agent_d.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def test_repo_validator_absent(tmp_path):
    assert V.run_repo_validator(tmp_path, tmp_path / "out", OP) is None


@pytest.mark.parametrize("under", [".agents/skills", "skills"])
def test_repo_validator_runs_with_env(tmp_path, under):
    repo = tmp_path / "repo"
    _fake_script(
        repo,
        textwrap.dedent(
            """\
            echo "kernel=$1"
            echo "out=$CUTILE_KERNEL_OUT_ROOT"
            echo "tg=$TILEGYM_PATH"
            echo "cwd=$(pwd)"
            echo "to stderr" >&2
            exit 3
            """
        ),
        under,
    )
    run = V.run_repo_validator(repo, tmp_path / "out", OP)
    assert run is not None and run.exit_code == 3
    r = repo.resolve()
    assert run.output.splitlines() == [
        f"kernel={OP}",
        f"out={(tmp_path / 'out').resolve()}",
        f"tg={r}",
        f"cwd={r}",
        "to stderr",
    ]
    assert f"bash {under}/{V.SKILL}/scripts/validate_agent_d.sh {OP} 2>&1" in run.command
    assert f"CUTILE_KERNEL_OUT_ROOT={(tmp_path / 'out').resolve()}" in run.command


def test_repo_validator_prefers_agents_dir(tmp_path):
    _fake_script(tmp_path, "echo agents\n", ".agents/skills")
    _fake_script(tmp_path, "echo plain\n", "skills")
    run = V.run_repo_validator(tmp_path, tmp_path, OP)
    assert run.output == "agents\n" and run.exit_code == 0


def test_repo_validator_timeout_kills_the_group(tmp_path):
    marker = tmp_path / "late"
    _fake_script(tmp_path, f"echo started\n(sleep 5; touch {marker}) &\nsleep 30\n")
    t0 = time.monotonic()
    run = V.run_repo_validator(tmp_path, tmp_path, OP, timeout_s=1)
    assert time.monotonic() - t0 < 10
    assert run.exit_code == 124
    assert run.output.startswith("started\n") and "timed out after 1 s" in run.output
    time.sleep(5.5)
    assert not marker.exists()  # the background child died with the group


# --------------------------------------------------------------------------- parity with the real script

UPSTREAM = os.environ.get("AGENT_D_UPSTREAM_VALIDATOR", "")


@needs_cc
@pytest.mark.skipif(
    not (UPSTREAM and Path(UPSTREAM).is_file() and shutil.which("nm")),
    reason="set AGENT_D_UPSTREAM_VALIDATOR to a local validate_agent_d.sh",
)
@pytest.mark.parametrize(
    "mutate",
    [
        "none",
        "forget",
        "turbofish_only",
        "macro_only",
        "no_header",
        "no_table",
        "bad_first",
        "no_symbol",
        "no_wrapper",
        "ctypes",
        "autotune",
        "cga",
        "no_selector",
        "no_test_wiring",
    ],
)
def test_same_verdict_as_the_upstream_script(tmp_path, mutate):
    """Same exit code and FAIL count as TileGym's own script on the same folders (a copy of the
    script is made in tmp only for the run; it is never part of this repository)."""
    out_dir, repo, so = make_port(tmp_path)
    plain = FFI_EXPLICIT.replace("DevicePointer::<f32>::", "DevicePointer::")  # the script's literal form
    (out_dir / "ffi.rs").write_text(plain + "// num_cta_in_cga\n")
    w = repo / "src" / "tilegym" / "ops" / "cutile_rs" / f"{OP}.py"
    if mutate == "forget":
        (out_dir / "ffi.rs").write_text(plain + "std::mem::forget(x);\n")
    elif mutate == "turbofish_only":  # the one known difference: ours accepts, the script does not
        (out_dir / "ffi.rs").write_text(FFI_EXPLICIT + "// num_cta_in_cga\n")
    elif mutate == "macro_only":  # the other known difference: setup_device_stream! hides Device::new
        (out_dir / "ffi.rs").write_text(FFI_MACROS)
    elif mutate == "no_header":
        (out_dir / "correctness_cutile_rs.txt").write_text("t.py::a PASSED\n")
    elif mutate == "no_table":
        (out_dir / "reports" / "correctness.md").write_text("VERDICT: ALL_PASS\n")
    elif mutate == "bad_first":
        (out_dir / "reports" / "correctness.md").write_text("VERDICT: BLOCKED\n| Test |\n")
    elif mutate == "no_symbol":
        build_so(so, "int cutile_zzz(void) { return 0; }\n")
    elif mutate == "no_wrapper":
        w.unlink()
    elif mutate == "ctypes":
        w.write_text(WRAPPER + "lib.fn.argtypes = []\n")
    elif mutate == "autotune":
        (out_dir / "reference" / "analysis.json").write_text(json.dumps({"autotune_configs": [{"T": 1}]}))
    elif mutate == "cga":
        (out_dir / "reference" / "analysis.json").write_text(json.dumps({"num_ctas": 2}))
        (out_dir / "ffi.rs").write_text(plain)
    elif mutate == "no_selector":
        (repo / "src" / "tilegym" / "backend" / "selector.py").write_text("x = 1\n")
    elif mutate == "no_test_wiring":
        (repo / "tests" / "ops" / f"test_{OP}.py").write_text("x = 1\n")
    script = repo / ".agents" / "skills" / V.SKILL / "scripts" / "validate_agent_d.sh"
    script.parent.mkdir(parents=True)
    shutil.copyfile(UPSTREAM, script)
    theirs = V.run_repo_validator(repo, out_dir.parent, OP)
    ours = V.validate(out_dir, OP, repo, so)
    assert theirs is not None
    if mutate in ("turbofish_only", "macro_only"):
        assert (ours.exit_code, theirs.exit_code) == (0, 1), (ours.output, theirs.output)
        return
    assert ours.exit_code == theirs.exit_code, (ours.output, theirs.output)
    assert ours.output.splitlines()[-1] == theirs.output.splitlines()[-1], (ours.output, theirs.output)


def test_repo_validator_nm_pipe_does_not_fake_a_missing_symbol(tmp_path):
    """TileGym's script pipes `nm -D` into `grep -q` under pipefail; early grep exit must not fail it."""
    import shutil as _shutil

    from bot.report.validator import run_repo_validator

    if not _shutil.which("cc") or not _shutil.which("nm"):
        pytest.fail("cc and nm are needed (binutils, a C compiler)")
    src = tmp_path / "many.c"
    # The wanted symbol sorts first; thousands after it keep nm writing when grep has already quit.
    src.write_text(
        "int aaa_wanted(void){return 1;}\n"
        + "".join(f"int f{i}(void){{return {i};}}\n" for i in range(20000))
    )
    so = tmp_path / "libmany.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    repo = tmp_path / "repo"
    script = repo / "skills/tilegym-converting-cutile-triton-to-cutile-rs/scripts/validate_agent_d.sh"
    script.parent.mkdir(parents=True)
    script.write_text(
        "set -uo pipefail\n"
        f'if nm -D "{so}" | grep -q " T aaa_wanted$"; then echo OK; exit 0; else echo "FAIL: missing"; exit 1; fi\n'
    )
    runs = [run_repo_validator(repo, tmp_path / "out", "x") for _ in range(5)]
    assert [r.exit_code for r in runs] == [0] * 5, [r.output for r in runs]
    assert "PATH=" in runs[0].command  # the shim is part of the command shown in the block


def test_the_script_reads_the_op_s_tests_where_discovery_found_them(tmp_path):
    """The script greps only tests/ops/test_<op>.py; an op tested in a subpackage under another name
    (tests/ops/experimental/test_mhc.py) is checked through a view that links that file there."""
    _fake_script(
        tmp_path,
        'KERNEL="$1"\nTEST_FILE="$TILEGYM_PATH/tests/ops/test_${KERNEL}.py"\n'
        'if [ -f "$TEST_FILE" ] && grep -q cutile-rs "$TEST_FILE"; then echo OK; exit 0; fi\n'
        'echo "FAIL: tests/ops/test_${KERNEL}.py does NOT include cutile-rs"; exit 1\n',
    )
    (tmp_path / "src" / "tilegym").mkdir(parents=True)
    wired = tmp_path / "tests" / "ops" / "experimental" / "test_mhc.py"
    wired.parent.mkdir(parents=True)
    wired.write_text('_backends = ["cutile", "cutile-rs"]\n')
    assert V.run_repo_validator(tmp_path, tmp_path / "out", "mhc_sinkhorn").exit_code == 1  # as upstream
    run = V.run_repo_validator(
        tmp_path, tmp_path / "out", "mhc_sinkhorn", test_files=["tests/ops/experimental/test_mhc.py"]
    )
    assert run.exit_code == 0, run.output
    assert "mhc_sinkhorn's tests are tests/ops/experimental/test_mhc.py" in run.output.splitlines()[0]
    assert not (tmp_path / "tests" / "ops" / "test_mhc_sinkhorn.py").exists()  # the checkout is untouched
