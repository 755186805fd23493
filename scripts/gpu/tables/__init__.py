"""``table``: the documents rendered from the results files ``run`` wrote: docs/gpu.md (``gpu_md``)
and docs/perf.md (``perf_md``)."""
