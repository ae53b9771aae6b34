"""Retrieval with a trained embedder: persistent indexes and search (``index``, ``knn``,
``build``, ``results``), the image pipeline of a run (``transforms``, ``images``), the HTML run
report (``report``, ``figures``) and TorchScript/ONNX export (``export``); CLI in ``cli``."""
