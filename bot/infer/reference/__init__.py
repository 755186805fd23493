"""Facts from the cuTile Python reference op, read with ``ast``: ``op`` finds and parses it once and
reads how it sizes its output; ``direct`` reads a reference that calls ``ct.launch`` itself (its
pieces are in ``bot.infer.direct``), ``launch`` one that autotunes through ``exhaustive_search``
(its pieces are in ``bot.infer.launch``)."""
