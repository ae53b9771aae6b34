"""LIBC: learning intra-batch connections (Seidenschwarz, Elezi & Leal-Taixé, ICML 2021, Fig. 1
and the method section; details as the authors' ``trainer.py`` and configs run them).

A message passing network (:class:`~gspdml.models.message_passing.MessagePassingNetwork`)
refines every embedding from the others of the batch; label-smoothed, low-temperature
classifiers over the training classes train on the refined and on the backbone's embeddings
(the release's ``lsgnn`` and ``lsce`` terms)::

    f_i     = the embedder's pooled vector (output.pooled),  x_i = f_i / ||f_i||  (the embedding)
    r_i     = MPN(x_1..x_B)_i                            (the last layer, or all layers concatenated)
    L_bb    = CE_eps( (W_bb f_i + b) / T, y_i )
    L_mpn   = CE_eps( W_mpn BN(r_i) / T, y_i )
    L       = backbone_weight L_bb + mpn_weight L_mpn

``CE_eps``: cross-entropy against ``(1 - eps) onehot(y) + eps / C``, mean over the batch. The
MPN and classifiers live in the loss: retrieval embeds with the backbone alone (as the release
evaluates). Defaults: the authors' CUB configuration (other datasets: presets ``libc-*``).
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES, MetricLoss, Output
from gspdml.losses.reduction import Terms
from gspdml.models.message_passing import MessagePassingNetwork
from gspdml.typecheck import AT_LEAST_1, NON_NEGATIVE, POSITIVE, Interval


@LOSSES.register("libc")
class LIBC(MetricLoss):
    """LIBC (Seidenschwarz et al., ICML 2021): label-smoothed CE of the backbone vectors plus of
    their intra-batch message passing refinement (see the module docstring).

    Args:
        embedding_dim, num_classes: supplied by the trainer (the MPN's width and the classes).
        num_layers, num_heads: of the MPN (CUB 1 / 2, Cars 2 / 8, SOP 1 / 8, In-Shop 1 / 4 in
            the authors' configurations).
        temperature: ``T`` dividing both classifiers' logits.
        label_smoothing: ``eps`` of the smoothed targets.
        dropout: of the attention weights, the messages and the MLP (0.1).
        concat_layers: classify the concatenation of every layer's output (the authors' ``cat``,
            used on Cars) instead of the last layer's.
        backbone_weight, mpn_weight: the weights of ``L_bb`` and ``L_mpn`` (1 and 1).
        lr_multiplier: learning-rate multiplier of the MPN and the classifiers (1: the authors
            train everything at one rate).

    The backbone classifier reads ``output.pooled`` (the authors' ``fc7``) when given, else the
    embeddings (e.g. as the base loss of XML's predictions).
    """

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        num_layers: Annotated[int, AT_LEAST_1] = 1,
        num_heads: int = 2,
        temperature: Annotated[float, POSITIVE] = 0.2,
        label_smoothing: Annotated[float, Interval(0, 1, high_open=True)] = 0.1,
        dropout: Annotated[float, Interval(0, 1, high_open=True)] = 0.1,
        concat_layers: bool = False,
        backbone_weight: Annotated[float, NON_NEGATIVE] = 1.0,
        mpn_weight: Annotated[float, NON_NEGATIVE] = 1.0,
        lr_multiplier: float = 1.0,
    ) -> None:
        super().__init__()
        if num_heads < 1 or embedding_dim % num_heads:
            raise ConfigError(
                "loss.num_heads",
                f"the embedding width {embedding_dim} must be divisible by the number of heads, "
                f"got {num_heads!r}",
            )
        self.temperature, self.label_smoothing = float(temperature), float(label_smoothing)
        self.backbone_weight, self.mpn_weight = float(backbone_weight), float(mpn_weight)
        self.concat_layers = bool(concat_layers)
        self.lr_multiplier = float(lr_multiplier)
        self.mpn = MessagePassingNetwork(embedding_dim, num_layers, num_heads, dropout)
        width = embedding_dim * (num_layers if concat_layers else 1)
        self.backbone_classifier = nn.Linear(embedding_dim, num_classes)
        # the authors' classifier "neck": BatchNorm without a shift, then a bias-free linear map
        # with N(0, 0.001^2) weights
        self.mpn_norm = nn.BatchNorm1d(width)
        self.mpn_norm.bias.requires_grad_(False)
        self.mpn_classifier = nn.Linear(width, num_classes, bias=False)
        nn.init.normal_(self.mpn_classifier.weight, std=1e-3)

    def refined(self, embeddings: Tensor) -> Tensor:
        """The MPN's refined embeddings ``r`` (``[B, d]``, or ``[B, L d]`` with
        ``concat_layers``)."""
        outputs = self.mpn(embeddings)
        return torch.cat(outputs, dim=1) if self.concat_layers else outputs[-1]

    def classification(self, logits: Tensor, labels: Tensor) -> Tensor:
        """``[B]`` terms ``CE_eps(logits / T, y)``."""
        return F.cross_entropy(
            logits / self.temperature,
            labels,
            label_smoothing=self.label_smoothing,
            reduction="none",
        )

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        unnormalised = output.pooled if output is not None and output.pooled is not None else None
        features = embeddings if unnormalised is None else unnormalised.to(embeddings.dtype)
        backbone = self.classification(self.backbone_classifier(features), labels)
        mpn_logits = self.mpn_classifier(self.mpn_norm(self.refined(embeddings)))
        mpn = self.classification(mpn_logits, labels)
        return self.reduce(
            {
                "backbone": Terms(backbone, weight=self.backbone_weight),
                "mpn": Terms(mpn, weight=self.mpn_weight),
            }
        )
