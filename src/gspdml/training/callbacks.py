"""Hooks into the training loop for methods that act between steps: modules of the model or loss
that subclass :class:`Callback`, the controller each loss declares, and the user's callbacks
(:func:`gspdml.training.parts.find_callbacks`), each by a stable name under which
:meth:`Callback.callback_state` survives ``--resume``.
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
