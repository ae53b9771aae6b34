"""Generalized Sum Pooling (GSP paper §4; Gürbüz thesis Ch. 5), one module per part.

* :mod:`~gspdml.pooling.gsp.layer`: the pooling layer ``GSP`` (registered as ``gsp``);
* :mod:`~gspdml.pooling.gsp.transport`: the partial-transport solver (P2) with its forward
  (``solve_log``, Prop. 4.1) and closed-form backward (``closed_form_cost_gradient``, Prop. 4.2);
* :mod:`~gspdml.pooling.gsp.fused`: costs, transport and weighted sum as one autograd function,
  with its backward chain ``cost_gradients``;
* :mod:`~gspdml.pooling.gsp.native`: the C kernels of the solver loop and the fused backward.

The package exports no names of its own, so every attribute of it is one of these modules.
"""
