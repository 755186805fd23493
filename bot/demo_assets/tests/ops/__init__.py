# Per-op correctness tests.
