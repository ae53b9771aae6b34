"""Cross-batch zero-shot regularisation (ZSR) of GSP (GSP paper §4.3, Eq. 4.4, Algorithms 1 and 4;
Gürbüz thesis §5.2.3, Eqs. 5.2.4-5.2.5, with Eq. 5.2.4 read as the standard cross-entropy).

On each of two class-disjoint halves ``b1, b2`` a ridge regressor maps the GSP
pseudo-attributes ``z`` (``output.attributes``) to learnable class embeddings ``v_y`` ((P3),
GSP paper §4.3)::

    A_b = argmin_A sum_{i in b} ||A z_i - v_{y_i}||^2 + ridge ||A||_F^2
        = Y_b (Z_b^T Z_b + ridge I_|b|)^-1 Z_b^T = Y_b Z_b^T (Z_b Z_b^T + ridge I_m)^-1

and predicts the other half (:func:`gspdml.ops.halves.ridge_across_halves`); ``L_ZS`` is the
soft-max cross-entropy of the predictions against *all* training classes (B6-B7)::

    l_j   = CE(s (A_other z_j)^T Y, y_j)     for every sample j, predicted from the other half
    L_ZS  = (1/B) sum_j l_j                              reduction "mean" (the authors' code)
    L_ZS  = (2/B) sum_{j in b1} l_j + (2/B) sum_{j in b2} l_j   reduction "sum_of_halves" (Eq. 4.4)
    L     = (1 - lambda) L_DML + lambda L_ZS                    (GSP paper §4.3)

``s`` is the logit scale: 1.0 in the paper, 9.5 in the authors' TF and PyTorch ``zsr_loss``.
The defaults (``mean``, 9.5) follow the authors' code (``scripts/zsr_defaults.py`` measures it).
"""

from __future__ import annotations

import math
import warnings
from typing import Annotated, Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES, Output
from gspdml.losses.reduction import Terms, reduce
from gspdml.losses.requirements import BatchRequirements
from gspdml.losses.wrapper import LossWrapper
from gspdml.ops.halves import ridge_across_halves
from gspdml.typecheck import MIXING, POSITIVE, Refusal

#: the named initial scales of the class embeddings ``v`` (see :class:`ZSR`)
CLASS_INITS = ("unit", "he_normal")
#: L_ZS at step 0 above this many ln(num_classes) is warned about (the collapse regime)
FAR_ABOVE_CHANCE = 5.0


@LOSSES.register("zsr")
class ZSR(LossWrapper):
    """``(1 - mixing) base + mixing L_ZS`` (see the module docstring).

    Args:
        base: the DML loss spec applied to the embeddings (any registered loss).
        embedding_dim, num_classes: supplied by the trainer; the class embeddings are
            ``num_classes x class_dim`` with ``class_dim = embedding_dim`` unless given (the
            authors' code; the paper leaves it open).
        mixing: ``lambda`` (0.1 on the benchmarks, 0.5 on CIFAR-Collage).
        ridge: the ridge weight ``epsilon`` of (P3) (0.05).
        logit_scale: multiplies the logits (9.5 = authors' code, the default; 1.0 = paper).
        reduction: ``"mean"`` over the whole batch (authors' code, the default) or
            ``"sum_of_halves"``, the sum of the two half-batch means (Eq. 4.4).
        lr_multiplier: learning-rate multiplier of the class embeddings. Default 1.0: they are
            trained with the network, as in the authors' framework (no multiplier is reported);
            raise it when the base learning rate is tiny (e.g. 1e-5) so the class embeddings
            can move away from their random initialisation. The base loss keeps its own.
        class_init: the initial class embeddings ``v``. ``"unit"`` (the default): entries
            N(0, 1/d), so ``||v_y||^2 ~ 1`` whatever the number of classes c. ``"he_normal"``:
            the authors' literal code (TF ``he_normal`` with fan_in = c; PyTorch
            ``kaiming_normal_`` with ``mode="fan_out"``, the same std sqrt(2/c)), so
            ``||v_y||^2 ~ 2d/c``: with s = 9.5 the logits at initialisation span
            ``s ||v||^2 ~ 24-32`` at the benchmarks' 75-100 classes but ~235 at 10 classes, where
            L_ZS starts about 50 ln c above chance and the network escapes by a constant
            attribute vector (collapse; ``docs/paper-vs-code.md``). The scale is a by-product of
            the fan, so the default keeps the class count out of it. A positive number is the
            entries' standard deviation itself (``||v_y||^2 ~ d std^2``), for studies of the
            scale (``experiments/zero_shot_attributes``, ``--study scale``).
        class_dim: length of the class embeddings (null: ``embedding_dim``).
    """

    requires = BatchRequirements(halves=True, reads=frozenset({"attributes"}))
    reductions = ("mean", "sum_of_halves")

    @classmethod
    def check_options(  # type: ignore[override]  # ZSR's options, all given by the registry
        cls, *, class_init: Union[str, float], **options: Any
    ) -> Refusal:
        return super().check_options(**options) or class_init_refusal(class_init)

    def __init__(
        self,
        base: Any,
        embedding_dim: int,
        num_classes: int,
        mixing: Annotated[float, MIXING] = 0.1,
        ridge: Annotated[float, POSITIVE] = 0.05,
        logit_scale: Annotated[float, POSITIVE] = 9.5,
        reduction: str = "mean",
        class_dim: Optional[int] = None,
        lr_multiplier: float = 1.0,
        class_init: Union[str, float] = "unit",
    ) -> None:
        super().__init__(base, embedding_dim, num_classes)
        self.mixing, self.ridge, self.logit_scale = float(mixing), float(ridge), float(logit_scale)
        self.set_reduction(reduction)
        self.lr_multiplier = float(lr_multiplier)
        self.class_init = class_init if isinstance(class_init, str) else float(class_init)
        dim = int(class_dim or embedding_dim)
        self.class_embeddings = nn.Parameter(initial_class_embeddings(num_classes, dim, class_init))
        self._first_loss_checked = False

    def zero_shot_loss(self, attributes: Tensor, labels: Tensor) -> Tensor:
        """``L_ZS`` of Eq. 4.4 on a batch ordered as two class-disjoint halves: the terms ``l_j``
        of both halves, reduced by ``reduction``. The ridge solve and the logits run outside
        autocast in the wider dtype of the attributes and the class embeddings, at least float32
        (float64 for a float64 model, float32 for half-precision attributes)."""
        losses = []
        dtype = torch.promote_types(attributes.dtype, self.class_embeddings.dtype)
        dtype = torch.promote_types(dtype, torch.float32)
        with torch.autocast(device_type=attributes.device.type, enabled=False):
            classes = self.class_embeddings.to(dtype)
            for half, predicted in ridge_across_halves(
                attributes.to(dtype), classes[labels], labels, self.ridge, "zsr"
            ):
                logits = self.logit_scale * predicted @ classes.T
                losses.append(F.cross_entropy(logits, labels[half], reduction="none"))
        parts = {"samples": Terms(*losses)}
        if not self._first_loss_checked and self.training:
            self._first_loss_checked = True  # one host sync, at the first training step
            warn_far_above_chance(
                float(reduce(parts, "mean").detach()),
                self.class_embeddings.shape[0],
                self.class_init,
            )
        return self.reduce(parts)

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        attributes = None if output is None else output.attributes
        if attributes is None:
            raise ConfigError(
                "loss",
                "zsr reads the pooling's pseudo-attributes, but the model gave none (use model.pooling: gsp)",
            )
        dml: Tensor = self.base(embeddings, labels, output)
        return (1.0 - self.mixing) * dml + self.mixing * self.zero_shot_loss(attributes, labels)


def class_init_refusal(value: Union[str, float]) -> Refusal:
    """``class_init``: one of :data:`CLASS_INITS` or a positive finite standard deviation (None)
    or the option and its error."""
    if value in CLASS_INITS if isinstance(value, str) else math.isfinite(value) and value > 0:
        return None
    return "class_init", (
        f"unknown value {value!r}; allowed: {', '.join(CLASS_INITS)} or a positive standard "
        "deviation of the entries (e.g. 0.1)"
    )


def initial_class_embeddings(num_classes: int, dim: int, rule: Union[str, float]) -> Tensor:
    """``v`` at initialisation: ``"unit"`` N(0, 1/d) entries; ``"he_normal"`` std sqrt(2/c) (the
    authors' code: fan = the number of classes); a number: N(0, rule^2) entries."""
    if rule == "he_normal":
        return nn.init.kaiming_normal_(torch.empty(num_classes, dim), mode="fan_out")
    std = 1.0 / math.sqrt(dim) if rule == "unit" else float(rule)
    return torch.randn(num_classes, dim) * std


def warn_far_above_chance(loss: float, num_classes: int, class_init: Union[str, float]) -> None:
    """Warn when L_ZS (per half) at the first step is more than :data:`FAR_ABOVE_CHANCE` times
    ln(c), the loss of uniform predictions: the regime in which the attributes collapse."""
    chance = math.log(num_classes)
    if loss > FAR_ABOVE_CHANCE * chance:
        warnings.warn(
            f"gspdml: ZSR's zero-shot loss starts at {loss:.1f}, {loss / chance:.0f}x ln({num_classes}) "
            f"(uniform predictions); with loss.class_init: {class_init} the class embeddings are too "
            "large for this many classes and the attributes tend to collapse to a constant; "
            "use loss.class_init: unit (or a smaller loss.logit_scale)",
            RuntimeWarning,
            stacklevel=2,
        )
