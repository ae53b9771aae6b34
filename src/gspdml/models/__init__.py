"""Models: backbones and the :class:`Embedder` that turns images into embeddings."""

from gspdml.models.embedder import Embedder, build_embedder
from gspdml.models.output import EmbedderOutput

__all__ = ["Embedder", "EmbedderOutput", "build_embedder"]
