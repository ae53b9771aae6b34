"""Composed image retrieval with a frozen vision–language model (Psomas thesis, chapters 4–5):
FreeDom (domain conversion) and its benchmarks' readers, WeiCom (remote sensing), their baselines, the PatternCom protocol
and the mAP/Recall@k of the authors' code.

The core needs only torch; open_clip and transformers are optional (``load_model``)."""
