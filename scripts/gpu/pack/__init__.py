"""``pack``, the CPU half of the GPU proof: the two trees built and ported (``trees``), the fault
corpus's trees (``faults``), and what both share to export, port and strip an op (``porting``)."""
