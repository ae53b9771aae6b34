"""gspdml.workflows: everything that trains and compares *several* runs, above the single run of
:mod:`gspdml.training`.

Every workflow, and the experiment scripts, train through the one runner
(:mod:`~gspdml.workflows.runner`) and write tables with the one writer
(:mod:`~gspdml.workflows.tables`).
"""
