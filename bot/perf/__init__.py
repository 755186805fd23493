"""The perf stage (TileGym's stage E) after an ``ALL_PASS``, one module per step:

- ``run``: which ``test_perf`` cases (three backends, same configs) and the pytest run;
- ``cover``: which configs to measure under stage E's cap (every parameter value at least once);
- ``records``: the cases and their benchmark records, read from the JUnit XML and the log;
- ``summarise``: the rows, ratios, geomeans and stage E's verdict;
- ``host_cause``: the one line naming a host-side cause of a gap, when the evidence shows one;
- ``reports``: stage E's files; ``validate``: its validators (ours and the checkout's scripts);
- ``stage``: the order of those steps, and when the stage runs at all;
- ``result``: the typed results they pass on.
"""
