"""Facts from the cuTile Python reference op, read with ``ast``: ``op`` finds and parses it once,
says where the carried-over wrapper's host code comes from and reads how it sizes its output."""
