"""``agent-d check``: a port's own host code (ffi.rs and the cffi wrapper) checked as it is, nothing
changed: its ABI against ffi.rs's export, and the host rules, each finding on its line."""
