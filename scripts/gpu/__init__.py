"""Helpers of ``scripts/gpu_proof.py`` (pack on a CPU machine, run on a GPU machine, render the table).

``bundle``, ``device``, ``bench`` and ``table`` use the standard library (``device`` also the
checkout's stdlib-only ``bot.testresults``): they run on the GPU machine with its system Python. ``pack`` needs this repository's ``bot`` package, cargo and pip.
"""

OPS = ("silu_and_mul", "swiglu", "matmul", "bmm", "attention_sink")
# the two host trees each run compares: TileGym's own, and the one agent-d generated
TREES = ("hand_written", "agent_d")
