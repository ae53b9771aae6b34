"""Hooks into the training loop for methods that act between steps.

The trainer calls, at each hook, every module of the model or of the loss that subclasses
:class:`Callback`, the controller each loss declares (``MetricLoss.controller``: CCP's
:class:`~gspdml.training.ccp_controller.CCPController` re-initialises the proxies after
validation rounds and adds the proximal gradient) and the user's ``RunParts.callbacks``
(:func:`gspdml.training.parts.find_callbacks`). Each has a stable name; state that must survive
``--resume`` goes in :meth:`Callback.callback_state` (tensors and plain scalars) and is restored
by that name.
"""

from __future__ import annotations

from typing import Any


class Callback:
    """No-op base; override what you need. ``trainer`` is the running
    :class:`~gspdml.training.trainer.Trainer` (model, loss, optimizer, step, evaluate ...)."""

    def on_train_start(self, trainer: Any) -> None:
        pass

    def on_after_backward(self, trainer: Any) -> None:
        """Gradients are populated; the optimiser has not stepped (e.g. a proximal term)."""

    def on_step_end(self, trainer: Any) -> None:
        pass

    def on_evaluation(self, trainer: Any, metrics: dict[str, float]) -> None:
        """Called after each validation round with its metrics."""

    def callback_state(self) -> dict[str, Any]:
        return {}

    def load_callback_state(self, state: dict[str, Any]) -> None:
        pass
