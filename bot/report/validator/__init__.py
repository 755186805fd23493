"""The built-in Agent D validator, and a runner for the checkout's own validator script.

The built-in validator (``builtin.validate``) checks a finished port the way TileGym's
``validate_agent_d.sh`` does (the list is in docs/specification.md, "The validator's checks"): the reports and the raw
pytest log in the per-kernel out folder, the out-folder copy of ``ffi.rs``, the exported symbol of
the built cdylib, the wrapper, and the three wiring points. It prints one ``OK:`` / ``FAIL:`` / ``WARN:`` /
``NOT RUN:`` line per check, then ``---`` and ``PASS`` (exit 0), ``FAIL: N issue(s)`` (exit 1) or
``NOT RUN: N check(s): ...`` (exit 3).

Where ours differs from the shell script, on purpose:

- when ``correctness.md`` says the run was BLOCKED (its ``block_class:`` line), an input that
  the run never produced (the raw pytest log or the test results and header in it, ffi.rs, the
  library, the wrapper) is a ``NOT RUN:`` line, not a FAIL: the checks that could not run are named, and the block does not read as a
  failure above ``VERDICT: BLOCKED``. Anything present is still checked, and a wrong one fails;
- it goes on after a missing ``correctness.md`` (the script stops there), so one run lists
  every problem; the exit code is the same;
- the device check also accepts the ``crate::setup_device_stream!(dev, stream, device_id, ...)``
  macro style, whose body calls ``Device::new`` with the argument (the script's literal grep
  for ``Device::new(device_id`` misses it); a hard-coded ``Device::new(0`` is a WARN;
- the unpack check also accepts the turbofish form ``DevicePointer::<E>::from_cu_deviceptr``
  (the script's grep wants ``DevicePointer::from_cu_deviceptr`` literally, so a launcher that
  only uses raw pointers written that way fails there and passes here);
- the symbol check reads the ELF dynamic symbol table with pyelftools instead of ``nm -D``:
  a defined (not ``SHN_UNDEF``), GLOBAL, ``STT_FUNC`` symbol, which is what ``nm`` prints as
  `` T ``;
- when several files could be the wrapper or the ``.so``, the choice is by sorted path, not
  by directory order, so it is repeatable.

Text checks on ``ffi.rs`` and the wrapper are plain searches over the whole file, comments
included, exactly as the script's ``grep`` is.

The checkout's own script runs too, when it has one (``repo_script.run_repo_validator``).

One module per idea: ``checks.py`` the table of checks (``CHECKS``, ``FFI_RULES``,
``WRAPPER_RULES``); ``builtin.py`` runs them into a ``ValidatorRun``; ``output.py`` their lines and
the verdict after ``---``; ``files.py`` where the checked files are and how they are read;
``elf.py`` the exported symbols of the library; ``repo_script.py`` the checkout's script.
"""

# The validator's public functions, for the callers (the tests) that use it as one module; agent-d's
# own modules import each from where it is defined.
from bot.report.validator.builtin import validate
from bot.report.validator.checks import device_from_argument
from bot.report.validator.elf import exported_functions
from bot.report.validator.files import default_so_path, find_wrapper
from bot.report.validator.repo_script import SKILL, run_repo_validator, run_script

__all__ = [
    "SKILL",
    "default_so_path",
    "device_from_argument",
    "exported_functions",
    "find_wrapper",
    "run_repo_validator",
    "run_script",
    "validate",
]
