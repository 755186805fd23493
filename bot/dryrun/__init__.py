"""The launch dry run: the cuTile reference and agent-d's wrapper launched on a CPU, side by side.

``plugin.py`` runs inside the checkout's pytest and records launches, with its two helpers
``cpu_cuda.py`` (CUDA on a CPU) and ``case_end.py`` (where a test case ends); ``port_side.py`` takes
the wrapper's C call through the launch plan; ``compare.py`` sets the two side by side; ``run.py``
is the stage. The plugin and its helpers import nothing else of agent-d: they run in the
checkout's interpreter.
"""
