"""Sources of facts about a kernel's host side, merged by authority: one module per source, except
the two that take several modules to read, the host contract (``contract``) and the cuTile
reference (``reference``), whose readers keep their pieces in ``direct`` and ``launch``."""
