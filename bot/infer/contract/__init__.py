"""The porter's host contract (``host_contract.yaml`` or stage B's ``host_launch_contract`` block):
``host_contract`` turns it into facts, ``keys`` reads how its keys are spelled and ``schema`` checks
it against ``contract.schema.json``, which lives beside them."""
