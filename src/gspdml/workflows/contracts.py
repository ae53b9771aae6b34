"""The contract checks of a component, shipped with the library: ``gspdml check MODULE``
(:mod:`gspdml.cli.tools`) imports a plugin module and runs :data:`CHECKS` on every pooling, loss
and backbone it registered, each built from its defaults (the repository's registry-wide tests
hold the library's own components to the same contracts, :doc:`design` "Contracts"). A pooling
that declares ``accepts_tokens = False`` must refuse tokens ``[B, H*W, C]`` with a ValueError; a
loss is given a batch meeting its :class:`~gspdml.losses.requirements.BatchRequirements`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, build_loss
from gspdml.losses.requirements import model_provides, requirements_of
from gspdml.models import build_embedder
from gspdml.models.backbones import BACKBONES
from gspdml.plugins import import_plugins
from gspdml.pooling import POOLINGS, build_pooling
from gspdml.registry import Registry

C, H, W = 24, 5, 6
CLASSES, DIM = 8, 16


@dataclass(frozen=True)
class CheckResult:
    """One contract of one component: passed, or the reason it failed."""

    kind: str
    name: str
    check: str
    passed: bool
    message: str = ""


def components_of(module: str) -> dict[str, list[str]]:
    """Import ``module`` (:func:`gspdml.plugins.import_plugins`) and list the poolings, losses
    and backbones it (or a submodule of it) registered, by kind."""
    import_plugins([module], field="module")
    registries: dict[str, Registry] = {"pooling": POOLINGS, "loss": LOSSES, "backbone": BACKBONES}
    found = {kind: registry.registered_from(module) for kind, registry in registries.items()}
    if not any(found.values()):
        raise ConfigError(
            "module",
            f"{module!r} registers no pooling, loss or backbone (register them on import, "
            "e.g. @POOLINGS.register('mine'))",
        )
    return found


def _features(batch: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, C, H, W, generator=torch.Generator().manual_seed(seed))


def _pooling(name: str, seed: int = 0) -> Any:
    torch.manual_seed(seed)
    return build_pooling({"name": name}, in_channels=C)


def _pooling_shape(name: str) -> None:
    pool = _pooling(name)
    out = pool(_features())
    _require(
        tuple(out.vector.shape) == (3, pool.out_channels()),
        f"vector {tuple(out.vector.shape)}, expected (3, {pool.out_channels()})",
    )
    _require(bool(torch.isfinite(out.vector).all()), "vector not finite")
    if out.weights is not None:
        _require(
            tuple(out.weights.shape) == (3, H, W),
            f"weights {tuple(out.weights.shape)}, expected (3, {H}, {W})",
        )


def _pooling_gradients(name: str) -> None:
    pool = _pooling(name).train()
    x = _features().requires_grad_(True)
    out = pool(x)
    target = torch.randn(out.vector.shape, generator=torch.Generator().manual_seed(2))
    loss = (out.vector * target).sum()
    if out.weights is not None:
        noise = torch.randn(out.weights.shape, generator=torch.Generator().manual_seed(3))
        loss = loss + (out.weights * noise).sum()
    loss.backward()
    _require(x.grad is not None and bool(x.grad.abs().sum() > 0), "no gradient reaches the input")
    dead = [
        n
        for n, p in pool.named_parameters()
        if p.requires_grad and (p.grad is None or not bool(p.grad.abs().sum() > 0))
    ]
    _require(not dead, f"no gradient for parameter(s) {', '.join(dead)}")


def _pooling_batch_independence(name: str) -> None:
    pool = _pooling(name).eval()
    x = _features(batch=4)
    with torch.no_grad():
        full = pool(x).vector
        for i in (0, 3):
            alone = pool(x[i : i + 1]).vector[0]
            _require(
                torch.allclose(alone, full[i], rtol=1e-4, atol=1e-5),
                f"sample {i} pools differently alone than in the batch",
            )


def _pooling_tokens(name: str) -> None:
    pool = _pooling(name).eval()
    x = _features()
    tokens = x.flatten(2).transpose(1, 2)
    if not getattr(type(pool), "accepts_tokens", True):
        try:
            pool(tokens)
        except ValueError:
            return
        raise AssertionError(
            "declares accepts_tokens = False but pooled tokens without a ValueError"
        )
    with torch.no_grad():
        from_map, from_tokens = pool(x).vector, pool(tokens).vector
    _require(
        torch.allclose(from_map, from_tokens, rtol=1e-5, atol=1e-5),
        "tokens [B, H*W, C] pool differently from the map",
    )


def _pooling_order(name: str) -> None:
    declared = getattr(type(_pooling(name)), "order_free", None)
    if declared is None:
        return
    pool = _pooling(name).eval()
    x = _features()
    perm = torch.randperm(H * W, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        a, b = pool(x).vector, pool(x.flatten(2)[:, :, perm].reshape_as(x)).vector
    invariant = torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    _require(
        invariant == declared,
        f"declares order_free = {declared} but shuffling the locations {'does not change' if invariant else 'changes'} the output",
    )


def _pooling_seeded(name: str) -> None:
    a, b = _pooling(name, 0).state_dict(), _pooling(name, 0).state_dict()
    _require(all(torch.equal(a[k], b[k]) for k in a), "the same seed builds other initial weights")


def _pooling_in_embedder(name: str) -> None:
    for dim in (32, None):
        torch.manual_seed(0)
        backbone = {"name": "small_cnn", "widths": [8, 16, 16, 32]}
        spec = {"backbone": backbone, "embedding_dim": dim, "pooling": {"name": name}}
        model = build_embedder(spec, in_channels=3).eval()
        with torch.no_grad():
            out = model(torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(4)))
        _require(
            tuple(out.embedding.shape) == (2, model.embedding_dim),
            f"embedding {tuple(out.embedding.shape)} with embedding_dim {dim}",
        )
        _require(
            torch.allclose(out.embedding.norm(dim=1), torch.ones(2), atol=1e-5),
            "embeddings are not unit-norm",
        )


def _loss_trains(name: str) -> None:
    torch.manual_seed(0)
    loss = build_loss({"name": name}, embedding_dim=DIM, num_classes=CLASSES).train()
    needs = requirements_of(loss)
    torch.manual_seed(1)
    gsp = {"name": "gsp", "num_prototypes": 4, "init": "random", "iters": 10}
    pooling = gsp if "attributes" in needs.reads else "gap"
    backbone = {"name": "small_cnn", "widths": [8, 8, 8]}
    spec = {"backbone": backbone, "embedding_dim": DIM, "pooling": pooling, "head": "local"}
    model = build_embedder(spec, 3).train()
    needs.check_output(model_provides(model))
    per_class = max(2, needs.samples_per_class)
    labels = torch.arange(4).repeat_interleave(per_class)
    if not needs.halves:
        labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(2))]
    images = torch.randn(len(labels), 3, 16, 16, generator=torch.Generator().manual_seed(3))
    value = loss.training_objective(model, images, labels)
    _require(value.dim() == 0, f"gives a tensor of shape {tuple(value.shape)}, not a scalar")
    _require(bool(torch.isfinite(value)), f"gives {value.item()}")
    value.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    _require(
        bool(grads) and all(bool(torch.isfinite(g).all()) for g in grads),
        "no finite gradient reaches the model",
    )
    _require(sum(float(g.norm()) for g in grads) > 0, "the gradient that reaches the model is zero")


def _backbone_forward(name: str) -> None:
    torch.manual_seed(0)
    backbone = BACKBONES.build({"name": name}, "model.backbone", in_channels=3).train()
    out = backbone(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1)))
    channels = out.shape[1] if out.dim() == 4 else out.shape[-1]
    _require(
        out.dim() in (3, 4) and out.shape[0] == 2,
        f"output of shape {tuple(out.shape)}; expected [2, C, h, w] or [2, N, C]",
    )
    _require(
        channels == backbone.out_channels,
        f"{channels} channels, declares out_channels = {backbone.out_channels}",
    )
    _require(bool(torch.isfinite(out).all()), "output not finite")
    out.float().square().mean().backward()
    dead = [n for n, p in backbone.named_parameters() if p.requires_grad and p.grad is None]
    _require(not dead, f"no gradient for parameter(s) {', '.join(dead[:5])}")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


CHECKS: dict[str, tuple[tuple[str, Callable[[str], None]], ...]] = {
    "pooling": (
        ("output shape", _pooling_shape),
        ("gradients reach every parameter and the input", _pooling_gradients),
        ("samples pooled independently", _pooling_batch_independence),
        ("tokens as the map, or refused", _pooling_tokens),
        ("order_free as declared", _pooling_order),
        ("seeded initialisation", _pooling_seeded),
        ("works in the Embedder, with and without a head", _pooling_in_embedder),
    ),
    "loss": (("finite loss and gradient on a batch it accepts", _loss_trains),),
    "backbone": (("feature map of out_channels, gradients", _backbone_forward),),
}


def run_checks(components: dict[str, list[str]]) -> Iterator[CheckResult]:
    """Every check of :data:`CHECKS` on every component; a component that cannot be built from
    its defaults fails each check with that reason."""
    for kind, names in components.items():
        for name in names:
            for title, check in CHECKS[kind]:
                try:
                    check(name)
                except AssertionError as exc:
                    yield CheckResult(kind, name, title, False, str(exc))
                except Exception as exc:  # the component's own error, shown where it arose
                    origin = exc.__cause__ or exc  # a plugin constructor's error, wrapped
                    where = traceback.extract_tb(origin.__traceback__)[-1]
                    message = f"{type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
                    yield CheckResult(kind, name, title, False, message)
                else:
                    yield CheckResult(kind, name, title, True)
