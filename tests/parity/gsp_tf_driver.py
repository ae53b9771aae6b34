"""The TensorFlow side of ``test_gsp_tf_step.py``: the GSP authors' layer and ZSR loss, run as
released (``vendor/gsp_tf/``) on the weights and batch of an ``.npz`` file, results to another.

Run by the TensorFlow interpreter (``GSPDML_TF_PYTHON``), never by the suite's: it imports
neither torch nor gspdml::

    $GSPDML_TF_PYTHON tests/parity/gsp_tf_driver.py IN.npz OUT.npz [IN.npz OUT.npz ...]

The vendored modules keep their relative imports; this script stands in for the package
``__init__`` files that were not vendored (each imports every module of its folder, the
``configs`` one the whole yacs configuration): :func:`install_packages` registers the packages
``framework.*`` with the two registries they hold (``register_pooling``, ``register_loss``) and a
configuration node with attribute access (``CfgNode``). Everything that computes is the authors'.

The framework's ``tf.function`` bodies run eagerly (``tf.config.run_functions_eagerly``): the
same operations without tracing them into graphs, which took 15 s of the 18 s per batch here.
Traced, the results differ from the eager ones by float32 rounding of a different operation
order, at most 5e-6 of a gradient's scale (Intel Xeon Ice Lake), far inside the test's
tolerances.

Input (``IN.npz``; float32 unless said; the batch in the TF sampler's order, see the test):

* ``maps [B, H, W, C]``: backbone feature maps; ``labels [B]`` (int32);
* ``kernel [C, d]``: the 1x1 ``feature_transform``; ``prototypes [m, d]``: ``target_support``;
* ``class_embeddings [c, d]``: ZSR's ``meta_proxy``; ``memory [N, d]``: a filled k-center memory;
* scalars: ``mu``, ``eps``, ``iters``, ``add_max_pool``, ``mixing``, ``ridge``, ``pos_margin``,
  ``neg_margin``, ``lr``, ``beta_1``, ``beta_2``, ``adam_epsilon``, ``weight_decay``,
  ``clip_norm``, ``clip_value``.

Output (``OUT.npz``): ``pooled [B, d]`` (GSP's vector, with the GMP branch when
``add_max_pool``), ``attributes [B, m]``, ``plan [B, m + 1, H, W]`` (residual ``rho`` in row 0,
the transport ``pi`` below), ``loss``, ``loss_zs``, ``loss_dml``, ``grad_<name>`` for ``maps``
and each weight, ``step_<name>`` for each weight after one step of the framework's optimiser
(``WeightRegularizer`` and ``ClipGradients``, the gradient transformers of its configs, then
Keras ``Adam``), and ``kcenter [m, d]``: the prototypes ``initialize_support_kernel`` picks from
``memory``.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import numpy as np
import tensorflow as tf
from _tf_driver import package, serve

FRAMEWORK = Path(__file__).resolve().parent / "vendor" / "gsp_tf" / "framework"
WEIGHTS = ("kernel", "prototypes", "class_embeddings")


class CfgNode(dict):
    """The framework's configuration node (a yacs ``CfgNode``) as far as the vendored modules
    use it: a mapping whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as missing:
            raise AttributeError(name) from missing

    def __setattr__(self, name, value):
        self[name] = value


class Arch(tf.keras.Model):
    """``model.arch`` of the framework (a Keras model the losses add their weights to), holding
    the GSP layer as the framework's ``genericEmbeddingModel`` does after its backbone."""

    def __init__(self, head):
        super().__init__()
        self.head = head

    def call(self, inputs, training=True):
        return self.head(inputs, training=training)


def _registry(kind: str):
    """A registry object and its ``register_<kind>(name)`` decorator, as the package
    ``__init__`` files of ``layers/pooling`` and ``losses`` define them."""
    factory = types.SimpleNamespace()

    def register(name):
        def add(cls):
            if hasattr(factory, name):
                raise ValueError(f"{name} {kind} is already registered!")
            setattr(factory, name, cls)
            return cls

        return add

    return factory, register


def install_packages() -> None:
    """Register ``framework`` and its sub-packages over the vendored folders (module docstring)."""
    package("framework", FRAMEWORK)
    cfg = CfgNode(model=CfgNode(embedding_head=CfgNode()), loss=CfgNode())
    config = package("framework.configs.config", None, CfgNode=CfgNode)
    default = package("framework.configs.default", None, cfg=cfg)
    package("framework.configs", None, config=config, default=default)
    package("framework.utilities", FRAMEWORK / "utilities")
    package("framework.solvers", FRAMEWORK / "solvers")
    package("framework.layers", FRAMEWORK / "layers")
    poolings, register_pooling = _registry("layer")
    package(
        "framework.layers.pooling",
        FRAMEWORK / "layers" / "pooling",
        factory=poolings,
        register_pooling=register_pooling,
    )
    losses, register_loss = _registry("loss")
    package("framework.losses", FRAMEWORK / "losses", factory=losses, register_loss=register_loss)


def scalar(inputs, name: str) -> float:
    return float(inputs[name])


def run(inputs) -> dict[str, np.ndarray]:
    """One batch through the authors' layer, loss and optimiser (module docstring)."""
    gsp_module = importlib.import_module("framework.layers.pooling.generalized_sum_pooling")
    importlib.import_module("framework.losses.contrastive_loss")  # registers "contrastive"
    zsr_module = importlib.import_module("framework.losses.zsr_loss")
    transformers = importlib.import_module("framework.solvers.gradient_transformers")

    maps = tf.constant(inputs["maps"])
    labels = tf.constant(inputs["labels"].astype(np.int32)[:, None])  # keras' y_true [B, 1]
    num_prototypes, dim = inputs["prototypes"].shape
    num_classes = inputs["class_embeddings"].shape[0]

    layer = gsp_module.GeneralizedSumPooling(
        embedding_size=dim,
        support_size=num_prototypes,
        transport_ratio=scalar(inputs, "mu"),
        entropy_regularizer_weight=scalar(inputs, "eps"),
        optimization_steps=int(inputs["iters"]),
        augment_max_pool=bool(inputs["add_max_pool"]),
        memory_size=int(inputs["memory"].shape[0]),
        name="EmbeddingHead",
    )
    layer._ready.assign(True)  # the prototypes are given: transport pooling from the first call
    arch = Arch(layer)
    arch(maps, training=True)  # builds the layer's 1x1 convolution and its transport
    layer._pre_feature_head.kernel.assign(inputs["kernel"][None, None])
    layer._partial_transport.kernel.assign(inputs["prototypes"])

    cfg = sys.modules["framework.configs.default"].cfg
    cfg.model.embedding_head.embedding_size = dim
    cfg.model.embedding_head.GeneralizedSumPooling.support_size = num_prototypes
    cfg.training = CfgNode(classes_per_batch=len(np.unique(inputs["labels"])))
    # configs/default.py's computation head (configs/dml_small.yaml restates the first two)
    cfg.loss.computation_head = CfgNode(
        normalize_embeddings=True,
        lipschitz_cont=False,
        distance_function="l2",
        squared_distance=False,
        miner=None,
        avg_nonzero_only=True,
        use_proxy=False,
        proxy_anchor=False,
        use_intra_proxy_pairs=False,
    )
    cfg.loss.contrastive.pos_margin = scalar(inputs, "pos_margin")
    cfg.loss.contrastive.neg_margin = scalar(inputs, "neg_margin")
    cfg.loss.zsr.function = "contrastive"
    cfg.loss.zsr.prediction_loss_weight = scalar(inputs, "mixing")
    cfg.loss.zsr.regression_regularizer_weight = scalar(inputs, "ridge")
    model = types.SimpleNamespace(arch=arch, num_classes=num_classes, learning_rate_multipliers={})
    loss = zsr_module.ZeroShotRegularizedLoss(model, cfg)
    zsr = loss.loss_fn
    zsr.meta_proxy.assign(inputs["class_embeddings"])

    variables = {
        "kernel": layer._pre_feature_head.kernel,
        "prototypes": layer._partial_transport.kernel,
        "class_embeddings": zsr.meta_proxy,
    }
    with tf.GradientTape() as tape:
        tape.watch(maps)
        output = layer(maps, training=True)
        total = loss.call(labels, output)
    grads = tape.gradient(total, [maps, *variables.values()])

    pooled, attributes = output[:, :dim], output[:, dim:]
    predicted, ordered = zsr.train_predictor(attributes, labels)
    bow = layer._pre_feature_head(maps)
    plan = layer._partial_transport([bow, layer._constant_ratio(bow), layer._zeros_cost(bow)])
    out = {
        "pooled": pooled,
        "attributes": attributes,
        "plan": plan,
        "loss": total,
        "loss_zs": zsr.attribute_loss(ordered, predicted),
        "loss_dml": type(zsr).__mro__[1].call(zsr, labels, pooled),  # the wrapped contrastive
        "grad_maps": grads[0],
    }
    out.update({f"grad_{name}": grad for name, grad in zip(variables, grads[1:])})
    out["grad_kernel"] = out["grad_kernel"][0, 0]

    # one step as the framework's trainer takes it: the configs' gradient transformers, then Adam
    weights = list(variables.values())
    pairs = list(zip(grads[1:], weights))
    holder = types.SimpleNamespace(trainable_weights=weights)
    pairs = transformers.WeightRegularizer(holder, scalar(inputs, "weight_decay"))(pairs)
    pairs = transformers.ClipGradients(scalar(inputs, "clip_norm"), scalar(inputs, "clip_value"))(
        pairs
    )
    tf.keras.optimizers.Adam(
        learning_rate=scalar(inputs, "lr"),
        beta_1=scalar(inputs, "beta_1"),
        beta_2=scalar(inputs, "beta_2"),
        epsilon=scalar(inputs, "adam_epsilon"),
        jit_compile=False,
    ).apply_gradients(pairs)
    # copies: the k-center below assigns the prototypes' variable
    out.update({f"step_{name}": np.array(variable) for name, variable in variables.items()})
    out["step_kernel"] = out["step_kernel"][0, 0]

    # the k-center initialisation of the prototypes from a full memory
    layer._memory.assign(inputs["memory"])
    out["kcenter"] = layer.initialize_support_kernel()
    return {name: np.asarray(value) for name, value in out.items()}


if __name__ == "__main__":
    serve("gsp_tf_driver.py", install_packages, run, sys.argv[1:])
