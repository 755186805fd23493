"""The pieces of the reader of a directly launched reference (``reference.direct``): the module and
its callees, single statements, autotuning inside the module, the registered function flattened
into wrapper steps, and each ``ct.launch``'s arguments mapped onto kernel.rs."""
