"""The functions a shared object exports, read from its ELF dynamic symbol table (pyelftools):
what the validator's symbol check and the build's export check look for."""

from __future__ import annotations

from pathlib import Path


def exported_functions(so_path: Path | str) -> list[str]:
    """Names of the functions a shared object exports, sorted.

    Read from the ELF ``.dynsym`` section: symbols of type ``STT_FUNC`` with GLOBAL binding
    that are defined in the object (section index not ``SHN_UNDEF``), i.e. what ``nm -D``
    lists with `` T ``. Imports (undefined references) are not listed.

    Raises ``OSError`` when the file cannot be read and ``ValueError`` when it is not an ELF
    file or has no dynamic symbol table.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    names: set[str] = set()
    with open(so_path, "rb") as fh:
        try:
            elf = ELFFile(fh)
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None or dynsym["sh_type"] != "SHT_DYNSYM":
                raise ValueError(f"{so_path}: no .dynsym section (not a shared object?)")
            for sym in dynsym.iter_symbols():
                if (
                    sym.name
                    and sym["st_info"]["type"] == "STT_FUNC"
                    and sym["st_info"]["bind"] == "STB_GLOBAL"
                    and sym["st_shndx"] != "SHN_UNDEF"
                ):
                    names.add(sym.name)
        except ELFError as exc:
            raise ValueError(f"{so_path}: not a readable ELF file: {exc}") from exc
    return sorted(names)
