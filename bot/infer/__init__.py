"""Sources of facts about a kernel's host side, one module per source, merged by authority."""
