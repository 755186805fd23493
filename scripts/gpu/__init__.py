"""Helpers of ``scripts/gpu_proof.py``, one subpackage per command: ``pack`` (on a CPU machine),
``run`` (on the GPU machine) and ``tables`` (docs/gpu.md and docs/perf.md from the results); the
bundle's format (``bundle``) and the fault corpus (``faults``), which both halves read, stay here.

``bundle``, ``faults``, ``run`` and ``tables`` use the standard library (``run.device`` also the
checkout's stdlib-only ``bot.testresults``): they run on the GPU machine with its system Python.
``pack`` needs this repository's ``bot`` package, cargo and pip.
"""

OPS = ("silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink")
# the two host trees each run compares: TileGym's own, and the one agent-d generated
TREES = ("hand_written", "agent_d")
