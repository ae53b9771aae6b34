"""The TensorFlow side of ``test_ccp_tf_step.py``: the CCP authors' proxy re-initialisation and
proximal term (``yetigurbuz/ccp-dml``, vendored unchanged under ``vendor/ccp_tf/``), run on the
arrays of an ``.npz`` file, results to another::

    $GSPDML_TF_PYTHON tests/parity/ccp_tf_driver.py IN.npz OUT.npz [IN.npz OUT.npz ...]

As ``gsp_tf_driver.py``, it registers the packages the vendored modules import from in place of
their ``__init__`` files and runs ``tf.function`` bodies eagerly (``_tf_driver.py``). It builds the framework's ``AlternatingProjectionCallback`` around the given proxies
and a sampler that returns the given pool one draw at a time, as the framework's
``representative_sampler`` returns one embedding per class, and ``DistanceRegularizer``, the
gradient transformer of the proximal term.

Input: ``pool [b, C, d]`` (draw ``j`` of every class), ``best [K C, d]`` (the proxies of the best
round, ``K``-major as the framework lays them out: row ``k C + c`` is proxy ``k`` of class
``c``; zeros before the first problem, as ``on_train_begin`` finds them), ``k``; ``weight``,
``anchor``, ``grad`` and ``prox_lambda`` for the proximal term. Output: ``proxies [K C, d]``
(``_updateRepresentatives``) and ``proximal_grad`` (the gradient after ``DistanceRegularizer``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
from _tf_driver import package, serve

FRAMEWORK = Path(__file__).resolve().parent / "vendor" / "ccp_tf" / "framework"


def install_packages() -> None:
    """Register ``framework`` and the sub-packages of the vendored modules."""
    package("framework", FRAMEWORK)
    package("framework.utilities", FRAMEWORK / "utilities")
    package("framework.solvers", FRAMEWORK / "solvers")
    package("framework.losses", FRAMEWORK / "losses")
    package("framework.losses.ccp", FRAMEWORK / "losses" / "ccp")


def run(inputs) -> dict[str, np.ndarray]:
    """One proxy re-initialisation and one proximal gradient (module docstring)."""
    callbacks = importlib.import_module("framework.losses.ccp.callback")
    transformers = importlib.import_module("framework.solvers.gradient_transformers")
    weights = [tf.Variable(inputs["weight"])]
    regularizer = transformers.DistanceRegularizer(weights, float(inputs["prox_lambda"]))
    proxies = tf.Variable(inputs["best"])
    draws = iter(tf.data.Dataset.from_tensor_slices(inputs["pool"]))
    callback = callbacks.AlternatingProjectionCallback(
        curr_weights=regularizer._prev_weights,
        model_weigths=weights,
        ccp_lambda=regularizer._lambda,
        lambda_decay=1.0,
        class_representatives=proxies,
        proxy_per_class=int(inputs["k"]),
        representative_sampler=lambda: next(draws),
        representative_pool_size=inputs["pool"].shape[0],
        normalized_embeddings=False,  # ccp.normalized_embeddings of losses/ccp/loss.py
    )
    callback.best_class_representatives.assign(inputs["best"])
    callback._updateRepresentatives()
    regularizer._prev_weights[0].assign(inputs["anchor"])  # theta*, as _updateSolution sets it
    ((grad, _),) = regularizer([(tf.constant(inputs["grad"]), weights[0])])
    return {"proxies": np.array(proxies), "proximal_grad": np.asarray(grad)}


if __name__ == "__main__":
    serve("ccp_tf_driver.py", install_packages, run, sys.argv[1:])
