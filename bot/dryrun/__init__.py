"""The launch dry run: the cuTile reference and agent-d's wrapper launched on a CPU, side by side.

``plugin.py`` runs inside the checkout's pytest and records launches; ``compare.py`` sets them side
by side through the launch plan; ``run.py`` is the stage. Nothing here is imported by the plugin:
it runs in the checkout's interpreter.
"""
