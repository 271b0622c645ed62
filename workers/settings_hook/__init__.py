"""The folder ``workers.compiler_settings`` puts first on a probe's ``PYTHONPATH``.

Its ``sitecustomize`` is not imported by benchwatch: a probe's Python runs it at start.
"""
