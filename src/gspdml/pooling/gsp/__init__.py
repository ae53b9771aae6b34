"""Generalized Sum Pooling (GSP paper §4; Gürbüz thesis Ch. 5): the layer (:mod:`.layer`,
registered as ``gsp``), the partial-transport solver (P2) with its forward (Prop. 4.1) and
closed-form backward (Prop. 4.2) (:mod:`.transport`), the fused layer function (:mod:`.fused`)
and the C kernels (:mod:`.native`). The package exports no names of its own.
"""
