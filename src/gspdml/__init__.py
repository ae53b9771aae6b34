"""gspdml: deep metric learning with Generalized Sum Pooling and friends.

The flow of one image (see DESIGN.md): backbone -> local 1x1 head -> pooling -> L2-normalise,
all inside :class:`gspdml.models.Embedder`, whose forward returns an
:class:`gspdml.models.EmbedderOutput`.
"""

__version__ = "0.1.0"
