"""Finding the build toolchain: libclang for bindgen."""

from bot.build import toolchain


def _globs(root):
    return tuple(str(root) + g.removeprefix("/usr/lib/llvm-*/lib") for g in toolchain.LIBCLANG_GLOBS[:2])


def test_libclang_cpp_alone_is_not_libclang(tmp_path, monkeypatch):
    monkeypatch.delenv("LIBCLANG_PATH", raising=False)
    (tmp_path / "libclang-cpp.so.14").write_bytes(b"")
    assert toolchain.libclang_dir(_globs(tmp_path)) is None  # bindgen rejects libclang-cpp


def test_versioned_libclang_is_found(tmp_path, monkeypatch):
    monkeypatch.delenv("LIBCLANG_PATH", raising=False)
    (tmp_path / "libclang-cpp.so.14").write_bytes(b"")
    (tmp_path / "libclang-14.so.1").write_bytes(b"")
    assert toolchain.libclang_dir(_globs(tmp_path)) == tmp_path


def test_explicit_libclang_path_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("LIBCLANG_PATH", str(tmp_path))
    assert toolchain.libclang_dir(()) == tmp_path
