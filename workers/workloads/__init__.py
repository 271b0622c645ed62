"""The built-in workloads: the model and operator definitions the harness measures.

Their results carry the suite names ``benchwatch-models`` and ``benchwatch-operators`` (the
``suite`` column, like ``torchbench``); ``workers.tiers`` says which of them each tier runs.
"""
