"""Ground-floor numerical primitives shared by pooling, losses and analysis.

Imports only torch, numpy and :mod:`gspdml.errors`: :mod:`~gspdml.ops.kcenter` (greedy
k-center), :mod:`~gspdml.ops.ridge` (closed-form ridge regression), :mod:`~gspdml.ops.halves`
(class-disjoint batch halves and ridge prediction across them) and
:mod:`~gspdml.ops.normalize` (clip normalisation onto the unit ball).
"""
