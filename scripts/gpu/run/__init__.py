"""``run``, the GPU half of the GPU proof: the stages over an unpacked bundle (``device``), the fault
corpus (``faults``) and the perf stage (``perf``) over one step runner (``steps``), and the
host-time benchmark (``bench``, also run on its own as a script)."""
