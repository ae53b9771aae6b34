"""Cross-batch metric learning (XML; Gürbüz & Alatan, ICIP 2023, XML paper §2, Eq. 2.4-2.11).

GAP is read as a convex combination of learnable prototypes ``nu_1..nu_m``; each image gets the
entropy-smoothed histogram over them (Eq. 2.4, "1x1 convolution + soft-max" averaged)::

    z_i = (1/n) sum_j softmax_i(eps nu_i^T x_j)                       (XML paper Eq. 2.4, eps = 10)

On each of two class-disjoint halves, prototypes are fitted by ridge regression from the
histograms ``Z`` to the pooled vectors ``Y`` (``output.pooled``, Eq. 2.8)::

    V_k = argmin_A ||A Z_k - Y_k||_F^2 + ridge ||A||_F^2 = Y_k (Z_k^T Z_k + ridge I)^-1 Z_k^T

and each half is predicted by the other's, ``Yhat_1 = V_2 Z_1``, ``Yhat_2 = V_1 Z_2``
(:func:`gspdml.ops.halves.ridge_across_halves`); the DML loss of the predictions within each half
(Eq. 2.10, L2-normalised when ``normalize_predictions``) gives (Eq. 2.11)::

    L = (1 - lambda) L_DML(embeddings) + lambda sum_k L_DML(Yhat_k, labels_k)
"""

from __future__ import annotations

from typing import Annotated, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES, Output
from gspdml.losses.requirements import BatchRequirements
from gspdml.losses.wrapper import LossWrapper
from gspdml.ops.halves import ridge_across_halves
from gspdml.typecheck import AT_LEAST_1, MIXING, POSITIVE


def soft_histogram(local: Tensor, prototypes: Tensor, eps: float) -> Tensor:
    """Eq. 2.4 of the XML paper: ``z_i = mean_j softmax_i(eps nu_i^T x_j)``; ``local`` ``[B, d, H, W]``
    (or tokens ``[B, n, d]``), ``prototypes`` ``[m, d]``; returns ``[B, m]`` rows summing to one."""
    tokens = local.flatten(2).transpose(1, 2) if local.dim() == 4 else local
    logits = eps * torch.einsum("bnd,md->bnm", tokens, prototypes)
    return torch.softmax(logits, dim=2).mean(dim=1)


@LOSSES.register("xml")
class XML(LossWrapper):
    """``(1 - mixing) base(embeddings) + mixing L_XML`` (see the module docstring).

    Args:
        base: the DML loss spec (any pair or proxy loss) used for both terms.
        embedding_dim, num_classes: supplied by the trainer; the prototypes are
            ``num_prototypes x embedding_dim`` (the local features' width with a 1x1 head).
        num_prototypes: ``m`` (64 for CUB/Cars, 128 for SOP/In-shop; XML paper §3.1).
        eps: soft-max inverse temperature of the histogram (10).
        mixing: ``lambda`` (0.01).
        ridge: the ridge weight of Eq. 2.8 (0.05).
        normalize_predictions: L2-normalise ``Yhat`` before the base loss.
        lr_multiplier: learning-rate multiplier of the prototypes (1.0: they are a 1x1
            convolution of the network in the paper, trained at the network's rate).
    """

    requires = BatchRequirements(halves=True, reads=frozenset({"local"}))

    def __init__(
        self,
        base: Any,
        embedding_dim: int,
        num_classes: int,
        num_prototypes: Annotated[int, AT_LEAST_1] = 64,
        eps: float = 10.0,
        mixing: Annotated[float, MIXING] = 0.01,
        ridge: Annotated[float, POSITIVE] = 0.05,
        normalize_predictions: bool = True,
        lr_multiplier: float = 1.0,
    ):
        super().__init__(base, embedding_dim, num_classes)
        self.mixing, self.ridge = float(mixing), float(ridge)
        self.eps = float(eps)
        self.normalize_predictions = bool(normalize_predictions)
        self.lr_multiplier = float(lr_multiplier)
        self.prototypes = nn.Parameter(
            nn.init.xavier_uniform_(torch.empty(num_prototypes, embedding_dim))
        )

    def cross_batch_loss(self, local: Tensor, pooled: Tensor, labels: Tensor) -> Tensor:
        """``L_XML`` of Eq. 2.10 for a batch ordered as two class-disjoint halves. The histograms,
        the ridge solve and the base loss of the predictions run outside autocast in the widest
        dtype of the local features, the pooled vectors and the prototypes, at least float32
        (float64 for a float64 model, float32 for half-precision features)."""
        width = local.shape[1] if local.dim() == 4 else local.shape[-1]
        if width != self.prototypes.shape[1]:
            raise ConfigError(
                "loss",
                f"xml prototypes have {self.prototypes.shape[1]} channels but the local features have {width}",
            )
        dtype = torch.float32
        for tensor in (local, pooled, self.prototypes):
            dtype = torch.promote_types(dtype, tensor.dtype)
        total = pooled.new_zeros((), dtype=dtype)
        with torch.autocast(device_type=local.device.type, enabled=False):
            z = soft_histogram(local.to(dtype), self.prototypes.to(dtype), self.eps)
            y = pooled.to(dtype)
            for half, predicted in ridge_across_halves(z, y, labels, self.ridge, "xml"):
                if self.normalize_predictions:
                    predicted = F.normalize(predicted, dim=1)
                total = total + self.base(predicted, labels[half])
        return total

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        if output is None or output.local is None:
            raise ConfigError(
                "loss",
                "xml reads the local features (output.local) of the embedder; none were given",
            )
        pooled = output.pooled if output.pooled is not None else embeddings
        dml: Tensor = self.base(embeddings, labels, output)
        return (1.0 - self.mixing) * dml + self.mixing * self.cross_batch_loss(
            output.local, pooled, labels
        )
