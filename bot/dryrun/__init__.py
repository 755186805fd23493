"""The launch dry run: the cuTile reference and agent-d's wrapper launched on a CPU, side by side.

``plugin.py`` runs inside the checkout's pytest and records launches; ``port_side.py`` takes the
wrapper's C call through the launch plan; ``compare.py`` sets the two side by side; ``run.py`` is
the stage. Nothing here is imported by the plugin: it runs in the checkout's interpreter.
"""
