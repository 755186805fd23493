"""agent-d on GitHub: dispatch, port job, finalize (docs/github.md)."""
