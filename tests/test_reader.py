"""kernel-reader (crate/) and its Python stage bot/read/reader.py, on real TileGym kernels and own fixtures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.read import reader
from bot.read.reader import ReaderError, ReaderUnavailable, read_kernel, read_kernel_json
from bot.read.types import BlockUse, FileUse, Generic, KernelSignature, Param

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "kernels"
FIXTURE_OPS = REPO / "tests" / "fixtures" / "ops"
SCHEMA_DOC = REPO / "docs" / "reader-schema.md"
WHEEL_OPS = ["silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink"]


@pytest.fixture(scope="session")
def reader_bin() -> Path:
    """The real binary: from AGENT_D_READER, or built from crate/ (about 30 s the first time)."""
    if not os.environ.get("AGENT_D_READER") and shutil.which("cargo") is None:
        pytest.skip("cargo not installed and AGENT_D_READER not set")
    return reader.reader_binary()


def run_bin(binary: Path, path: Path | str) -> tuple[int, str]:
    proc = subprocess.run([str(binary), str(path)], capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout


def wheel_kernel(root: Path, op: str) -> Path:
    return root / "tilegym" / "ops" / "cutile_rs" / f"{op}_kernel" / "kernel.rs"


def entry_map(sig: KernelSignature) -> dict:
    return {e.name: e for e in sig.entries}


# --------------------------------------------------------------------------- real TileGym kernels


def test_silu_and_mul(reader_bin, tilegym_wheel):
    sig = read_kernel(wheel_kernel(tilegym_wheel, "silu_and_mul"))
    assert sig.module == "silu_and_mul_module"
    (e,) = sig.entries
    assert e.name == "silu_and_mul_kernel"
    assert e.unsafe and e.public
    assert e.attr_args == {}
    assert e.generics == (
        Generic("E", "type", bounds=("ElementType",)),
        Generic("BLOCK_SIZE", "const", ty="i32"),
    )
    assert [p.name for p in e.params] == [
        "out_ptr",
        "in_ptr",
        "hidden_size",
        "in_row_stride",
        "out_row_stride",
    ]
    assert e.param("out_ptr") == Param("out_ptr", "ptr", elem="E", mutable=True)
    assert e.param("hidden_size") == Param("hidden_size", "scalar", ty="i32")
    assert e.outputs == ("out_ptr",)
    assert e.output_evidence == {"out_ptr": "store_ptr_tko"}
    assert e.block.axes == 1 and not e.block.grid_stride
    assert e.block.evidence == "get_tile_block_id().0"


def test_swiglu(reader_bin, tilegym_wheel):
    sig = read_kernel(wheel_kernel(tilegym_wheel, "swiglu"))
    (e,) = sig.entries
    assert e.name == "swiglu_forward_kernel"
    assert len(e.params) == 15
    assert [p.name for p in e.params if p.kind == "ptr"] == ["a_ptr", "b_ptr", "c_ptr"]
    assert e.outputs == ("c_ptr",)
    assert e.output_evidence == {"c_ptr": "store_ptr_tko"}
    assert e.block == BlockUse(1, False, "get_tile_block_id().0")


def test_matmul(reader_bin, tilegym_wheel):
    sig = read_kernel(wheel_kernel(tilegym_wheel, "matmul"))
    assert sig.module == "matmul_module"
    entries = entry_map(sig)
    assert list(entries) == ["non_persistent_matmul_kernel", "static_persistent_matmul_kernel"]
    for e in sig.entries:
        assert e.outputs == ("c",)
        assert e.output_evidence == {"c": "partition_full_mut"}
        assert [(p.name, p.rank, p.elem) for p in e.params[:3]] == [
            ("a", 2, "E"),
            ("b", 2, "E"),
            ("c", 2, "E"),
        ]
        assert e.block.axes == 1
    np, sp = entries["non_persistent_matmul_kernel"], entries["static_persistent_matmul_kernel"]
    assert not np.block.grid_stride
    assert sp.block.grid_stride
    assert "step_by(grid_x as usize)" in sp.block.evidence
    assert [g.name for g in np.generics] == ["E", "BM", "BN", "BK", "CAST_TF32"]
    assert [g.name for g in sp.generics] == ["E", "BM", "BN", "BK", "GROUP_SIZE_M", "CAST_TF32"]
    assert [p.name for p in sp.params[3:]] == ["m", "n", "k"]


def test_bmm(reader_bin, tilegym_wheel):
    entries = entry_map(read_kernel(wheel_kernel(tilegym_wheel, "bmm")))
    np, sp = entries["non_persistent_bmm_kernel"], entries["static_persistent_bmm_kernel"]
    assert np.block.axes == 3 and not np.block.grid_stride
    assert np.block.evidence == "let (bid_m, bid_n, batch) = get_tile_block_id()"
    assert sp.block.axes == 1 and sp.block.grid_stride
    assert np.attr_args == {"unchecked_accesses": "true"}
    assert list(sp.attr_args) == ["unchecked_accesses", "optimization_hints"]
    assert sp.attr_args["optimization_hints"].replace(" ", "") == "(sm_100=(occupancy=1,num_cta_in_cga=2,),)"
    assert all(p.rank == 3 for p in np.params if p.kind == "tensor")
    assert np.outputs == sp.outputs == ("c",)
    assert [g.name for g in sp.generics][-2:] == ["TRANSPOSE_A", "TRANSPOSE_B"]


def test_attention_sink(reader_bin, tilegym_wheel):
    (e,) = read_kernel(wheel_kernel(tilegym_wheel, "attention_sink")).entries
    assert e.block.axes == 2 and not e.block.grid_stride
    assert e.block.evidence == "let (bid_x, bid_y, _bid_z) = get_tile_block_id()"
    assert e.param("start_q") == Param("start_q", "tensor", elem="i32", rank=1)
    assert e.param("sinks").rank == 1 and e.param("q").rank == 4
    assert e.param("qk_scale") == Param("qk_scale", "scalar", ty="f32")
    assert e.outputs == ("out",)
    assert e.output_evidence == {"out": "partition_full_mut"}
    assert [g.name for g in e.generics] == [
        "E",
        "TILE_D",
        "H",
        "N_KV_CTX",
        "TILE_M",
        "TILE_N",
        "QUERY_GROUP_SIZE",
        "BANDWIDTH",
    ]
    assert "optimization_hints" in e.attr_args


@pytest.mark.parametrize("op", WHEEL_OPS)
def test_wheel_kernels_deterministic_and_clean(reader_bin, tilegym_wheel, op):
    path = wheel_kernel(tilegym_wheel, op)
    rc1, out1 = run_bin(reader_bin, path)
    rc2, out2 = run_bin(reader_bin, path)
    assert rc1 == rc2 == 0
    assert out1 == out2
    doc = json.loads(out1)
    assert list(doc) == ["schema_version", "path", "module", "entries", "warnings", "file_uses", "refused"]
    assert doc["refused"] == []
    assert doc["path"] == str(path)
    assert doc["warnings"] == []
    assert doc["file_uses"] == []  # TileGym kernels import only inside their module
    for e in doc["entries"]:
        assert list(e) == [
            "name",
            "line",
            "unsafe",
            "public",
            "attr_args",
            "generics",
            "params",
            "outputs",
            "output_evidence",
            "block",
        ]
        src_line = path.read_text().splitlines()[e["line"] - 1]
        assert f"fn {e['name']}" in src_line


# --------------------------------------------------------------------------- own fixtures


def test_softmax_like_views(reader_bin):
    (e,) = read_kernel(FIXTURES / "row_softmax_views.rs").entries
    assert e.name == "row_softmax_kernel"
    assert e.unsafe and not e.public
    assert e.outputs == ("y_ptr",)
    assert e.output_evidence == {"y_ptr": "partition_mut"}  # earliest sink: y_view.partition_mut
    assert e.param("x_ptr").kind == "ptr"
    assert [p.name for p in e.params if p.kind == "scalar"] == ["m", "n", "s_m", "s_n"]
    assert e.block.axes == 1
    assert e.attr_args["unchecked_accesses"] == "true"


def test_literal_specialised_pair(reader_bin):
    doc = read_kernel_json(FIXTURES / "head_dim_literals.rs")
    assert [e["name"] for e in doc["entries"]] == ["head_norm_kernel_d64", "head_norm_kernel_d128"]
    shapes = [e["params"][0]["shape"] for e in doc["entries"]]
    assert shapes == [["-1", "64"], ["-1", "128"]]
    for e in read_kernel(FIXTURES / "head_dim_literals.rs").entries:
        assert e.outputs == ("y",)
        assert e.param("x").rank == 2
        assert e.param("eps") == Param("eps", "scalar", ty="f32")


def test_i32_auxiliary_tensor_is_input(reader_bin):
    (e,) = read_kernel(FIXTURES / "gather_rows_i32_index.rs").entries
    assert e.param("idx") == Param("idx", "tensor", elem="i32", rank=1)
    # idx only feeds loaded values (and table only metadata) into the store coordinates
    assert e.outputs == ("out",)
    assert e.output_evidence == {"out": "partition_full_mut"}  # reached through `let dst = out;`
    assert e.block.axes == 2
    assert e.block.evidence.startswith("bid.1")


def test_mut_tensor_output(reader_bin):
    sig = read_kernel(FIXTURES / "axpy_mut_output.rs")
    assert sig.module == "axpy_module"
    (e,) = sig.entries
    assert not e.unsafe and not e.public
    assert e.generics[0] == Generic("T", "type", bounds=("ElementType", "Copy"))
    assert e.param("y") == Param("y", "tensor", elem="T", rank=1, mutable=True)
    assert e.param("x").mutable is False
    assert e.outputs == ("y",)
    assert e.output_evidence == {"y": "&mut"}
    assert e.block.axes == 0
    doc = read_kernel_json(FIXTURES / "axpy_mut_output.rs")
    assert doc["entries"][0]["params"][1]["shape"] == ["B"]


def test_grid_stride_and_shadowing(reader_bin):
    (e,) = read_kernel(FIXTURES / "grid_stride_copy.rs").entries
    assert e.outputs == ("dst_ptr",)  # the shadowed `p` holding src_ptr never reaches the store
    assert e.block.axes == 1
    assert e.block.grid_stride
    assert "step_by(nblocks as usize)" in e.block.evidence


def test_bare_entry_is_an_error_diagnostic(reader_bin):
    doc = read_kernel_json(FIXTURES / "bare_entry.rs")
    assert [e["name"] for e in doc["entries"]] == ["flagged_kernel"]
    errors = [w for w in doc["warnings"] if w["level"] == "error"]
    assert len(errors) == 1
    assert errors[0]["function"] == "no_launcher_kernel"
    assert "entry attribute without parentheses produces no launcher" in errors[0]["message"]
    assert errors[0]["line"] == 9
    flags = [w for w in doc["warnings"] if w["level"] == "warning"]
    assert flags and "unchecked_accesses = true" in flags[0]["message"]
    assert doc["entries"][0]["attr_args"] == {}

    with pytest.raises(ReaderError) as exc:
        read_kernel(FIXTURES / "bare_entry.rs")
    assert exc.value.line == 9
    assert "no launcher" in str(exc.value)
    relaxed = read_kernel(FIXTURES / "bare_entry.rs", strict=False)
    assert [e.name for e in relaxed.entries] == ["flagged_kernel"]


def test_mapped_partition_output_is_a_partition_not_a_scalar(reader_bin):
    path = FIXTURES / "mapped_partition_output.rs"
    (e,) = read_kernel(path).entries
    dst = e.param("dst")
    assert dst == Param(
        "dst",
        "partition",
        elem="E",
        mutable=True,
        partition_type="MappedPartitionMut<E, {[BM, BN]}, MAP_SHAPE>",
    )
    # An output by its type (the launcher lowers it like &mut Tensor), whatever the body does.
    assert e.outputs == ("dst",)
    assert e.output_evidence == {"dst": "MappedPartitionMut"}
    assert e.param("src") == Param("src", "tensor", elem="E", rank=2)
    assert [g.name for g in e.generics] == ["E", "BM", "BN", "MAP_SHAPE"]
    doc = read_kernel_json(path)
    assert doc["entries"][0]["params"][0] == {
        "name": "dst",
        "kind": "partition",
        "elem": "E",
        "mutable": True,
        "partition_type": "MappedPartitionMut<E, {[BM, BN]}, MAP_SHAPE>",
    }
    assert doc["warnings"] == []


def test_partition_params_by_value_and_borrowed(reader_bin):
    entries = entry_map(read_kernel(FIXTURES / "partition_params.rs"))
    by_value = entries["by_value_partitions"]
    assert [(p.name, p.kind) for p in by_value.params] == [
        ("src", "partition"),
        ("dst", "partition"),
        ("scale", "scalar"),
    ]
    src, dst = by_value.param("src"), by_value.param("dst")
    assert (src.elem, src.mutable, src.partition_type) == ("E", False, "Partition<'a, E, {[B]}>")
    assert (dst.elem, dst.mutable, dst.partition_type) == ("E", True, "PartitionMut<'a, E, {[B]}>")
    assert by_value.outputs == ("dst",)  # the read-only Partition is not an output
    assert by_value.output_evidence == {"dst": "PartitionMut"}
    borrowed = entries["borrowed_mapped"].param("out")
    assert (borrowed.kind, borrowed.mutable) == ("partition", True)
    assert borrowed.partition_type == "&mut cutile::core::MappedPartitionMut<E, {[BM]}, MAP>"


def test_other_param_kinds_keep_their_json(reader_bin, tilegym_wheel):
    """The partition kind adds keys only to partitions: tensor, ptr and scalar params print as before."""
    doc = read_kernel_json(wheel_kernel(tilegym_wheel, "attention_sink"))
    params = {p["name"]: p for p in doc["entries"][0]["params"]}
    assert list(params["start_q"]) == ["name", "kind", "elem", "rank", "mutable", "shape"]
    assert list(params["qk_scale"]) == ["name", "kind", "ty"]
    doc = read_kernel_json(wheel_kernel(tilegym_wheel, "silu_and_mul"))
    assert list(doc["entries"][0]["params"][0]) == ["name", "kind", "elem", "mutable"]


def test_file_uses_top_level_only(reader_bin):
    path = FIXTURE_OPS / "tile_copy_kernel" / "kernel.rs"
    sig = read_kernel(path)
    assert sig.file_uses == (
        FileUse("TileKernel", "cutile::tile_kernel::TileKernel", line=10),
        FileUse("tile_copy_kernel", "tile_copy_module::tile_copy_kernel", line=11),
        FileUse("*", "cutile::prelude", glob=True, line=13),
    )  # `use cutile::core::*;` inside the module is not in the file's scope
    doc = read_kernel_json(path)
    assert doc["file_uses"][0] == {
        "name": "TileKernel",
        "path": "cutile::tile_kernel::TileKernel",
        "glob": False,
        "line": 10,
    }
    assert read_kernel(FIXTURES / "mapped_partition_output.rs").file_uses == (
        FileUse("cutile", "cutile", line=7),
        FileUse("*", "cutile::prelude", glob=True, line=8),
    )


# --------------------------------------------------------------------------- errors


def test_malformed_kernel_error_json(reader_bin):
    path = FIXTURES / "malformed.rs"
    rc, out = run_bin(reader_bin, path)
    assert rc == 2
    doc = json.loads(out)
    assert list(doc) == ["schema_version", "path", "error"]
    assert doc["schema_version"] == 1
    assert doc["error"]["line"] == 9
    assert doc["error"]["column"] == 22
    assert doc["error"]["message"].startswith("Rust syntax error")

    with pytest.raises(ReaderError) as exc:
        read_kernel(path)
    assert (exc.value.line, exc.value.column) == (9, 22)
    assert str(exc.value).startswith("kernel.rs:9:22: Rust syntax error")


def test_no_module(reader_bin):
    rc, out = run_bin(reader_bin, FIXTURES / "no_module.rs")
    assert rc == 2
    assert "cutile::module" in json.loads(out)["error"]["message"]


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage", b"fn main( {"])
def test_odd_inputs_never_panic(reader_bin, tmp_path, content):
    f = tmp_path / "kernel.rs"
    f.write_bytes(content)
    rc, out = run_bin(reader_bin, f)
    assert rc == 2
    err = json.loads(out)["error"]
    assert err["message"] and "internal error" not in err["message"]


def test_missing_file_and_usage(reader_bin, tmp_path):
    rc, out = run_bin(reader_bin, tmp_path / "nope.rs")
    assert rc == 2
    assert json.loads(out)["error"]["line"] == 0
    proc = subprocess.run([str(reader_bin)], capture_output=True, text=True, check=False)
    assert proc.returncode == 64 and "usage" in proc.stderr


def test_reader_error_str():
    e = ReaderError("boom", 3, 7)
    assert (e.message, e.line, e.column) == ("boom", 3, 7)
    assert str(e) == "kernel.rs:3:7: boom"


# --------------------------------------------------------------------------- locating the binary


def test_env_override(reader_bin, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_D_READER", str(reader_bin))
    assert reader.reader_binary() == reader_bin
    monkeypatch.setenv("AGENT_D_READER", str(tmp_path / "missing"))
    with pytest.raises(ReaderUnavailable, match="AGENT_D_READER"):
        reader.reader_binary()


def test_installed_without_crate(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENT_D_READER", raising=False)
    monkeypatch.setattr(reader, "CRATE_DIR", tmp_path / "no-crate")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ReaderUnavailable, match="cargo build --release"):
        reader.reader_binary()
    fake = tmp_path / "kernel-reader"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert reader.reader_binary() == fake


def test_no_cargo(monkeypatch, tmp_path):
    monkeypatch.setattr(reader.shutil, "which", lambda name: None)
    with pytest.raises(ReaderUnavailable, match="cargo not found"):
        reader._build(tmp_path)


def test_build_failure_is_one_line(tmp_path):
    if shutil.which("cargo") is None:
        pytest.skip("cargo not installed")
    crate = tmp_path / "crate"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "kernel-reader"\nversion = "0.0.0"\nedition = "2021"\n'
    )
    (crate / "src" / "main.rs").write_text("fn main() { not rust }\n")
    with pytest.raises(ReaderUnavailable) as exc:
        reader._build(crate)
    assert "\n" not in str(exc.value)
    assert str(exc.value).startswith("building kernel-reader failed")


def test_freshness(tmp_path):
    crate = tmp_path / "crate"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text("")
    (crate / "src" / "main.rs").write_text("")
    binary = tmp_path / "kernel-reader"
    assert not reader._is_fresh(binary, crate)
    binary.write_text("")
    os.utime(crate / "Cargo.toml", (1000, 1000))
    os.utime(crate / "src" / "main.rs", (1000, 1000))
    os.utime(binary, (2000, 2000))
    assert reader._is_fresh(binary, crate)
    os.utime(crate / "src" / "main.rs", (3000, 3000))
    assert not reader._is_fresh(binary, crate)


# --------------------------------------------------------------------------- the schema document


def test_schema_doc_names_every_key(reader_bin, tilegym_wheel):
    text = SCHEMA_DOC.read_text()
    assert "schema_version" in text and re.search(r"\bversion 1\b|schema_version.*1", text)
    keys: set[str] = set()

    def collect(node, parent=""):
        if isinstance(node, dict):
            for k, v in node.items():
                if parent not in ("attr_args", "output_evidence"):
                    keys.add(k)
                collect(v, k)
        elif isinstance(node, list):
            for v in node:
                collect(v, parent)

    paths = [wheel_kernel(tilegym_wheel, op) for op in WHEEL_OPS] + sorted(FIXTURES.glob("*.rs"))
    for path in paths:
        _, out = run_bin(reader_bin, path)
        collect(json.loads(out))
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, f"docs/reader-schema.md does not describe: {missing}"


def test_schema_doc_example_is_real_output(reader_bin, tmp_path):
    text = SCHEMA_DOC.read_text()
    rust = re.search(r"```rust\n(.*?)```", text, re.DOTALL).group(1)
    report = re.findall(r"```json\n(.*?)```", text, re.DOTALL)[1]
    (tmp_path / "kernel.rs").write_text(rust)
    proc = subprocess.run(
        [str(reader_bin), "kernel.rs"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == json.loads(report)
