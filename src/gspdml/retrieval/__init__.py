"""Retrieval with a trained embedder: persistent indexes and exact search (``index``,
``exact_search``, ``build``; a search returns :class:`gspdml.evaluation.RetrievalResults`),
approximate search (``ann``), the images of a run and how they are preprocessed (``sources``,
``preprocessing``), the HTML run report (``report``, ``figures``) and TorchScript/ONNX export
(``export``); its commands are in :mod:`gspdml.cli.retrieval`. From Python: :class:`Encoder`
embeds new images with a run, :class:`RetrievalIndex` stores and searches them."""

from gspdml.retrieval.encoder import Encoder
from gspdml.retrieval.index import RetrievalIndex

__all__ = ["Encoder", "RetrievalIndex"]
