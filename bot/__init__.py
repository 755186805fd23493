"""agent-d: the host stage of TileGym's cutile-rs kernel ports, as a deterministic bot."""

__version__ = "0.1.0"
