"""Localization (issue 28): from "it regressed" to "this change did it".

The first modules are pure: the three-valued judgement of a probe (``judge``), the adaptive
repeats and the record of every probe (``probing``), and the search strategies over an
oracle that measures a probe (``isolate``, ``bisect``, ``ddmin``). Running them on workers,
the environment providers and the pages build on these.
"""
