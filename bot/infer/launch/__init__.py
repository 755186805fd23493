"""The pieces of the reader of an autotuned reference (``reference.launch``): one variant and what
reading it needs, the ``exhaustive_search`` helper, bmm's fixed-size branch, the config generators,
and ``syntax``, the ``ast`` helpers both reference readers share."""
