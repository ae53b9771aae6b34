"""Step parity with the ProxyNCA++ authors' code (Teh et al., ECCV 2020; ``euwern/proxynca_pp`` at
commit 217233d, MIT licence, vendored under ``vendor/proxynca_pp/`` with its licence and commit).

The authors' ``train.py`` lines that build the model, the loss, the warm-up and main optimisers and
the reduce-on-plateau schedule, and that run the warm-up and main loops, are executed as they are
(``vendor/proxynca_pp/train.py``), with their ``config/cub.json``. Beside them gspdml's
``proxynca-cub`` preset trains through :class:`~gspdml.training.Trainer`. Both sides start from the
same ResNet-50 weights (random, 32 px images: the recipe does not depend on the image size), the
same embedding layer and the same proxies, take the same batches (the ones gspdml's sampler drew)
and are fed the same validation R@1 at the end of every main epoch, in float64.

Each epoch is one batch of 3 classes x 2 images here: 1 warm-up epoch, then 4 main epochs. The
plateau patience is 1 (the recipe's 4 would need 6 main epochs to show a drop) and the validation
scores rise by 1e-5 per epoch, less than torch's relative threshold 1e-4: the first main epoch sets
the best, the next two are bad, and ``ReduceLROnPlateau`` drops the rate after the second of them
(more than ``patience`` bad epochs), so the last step runs at a tenth of the rate. The 5 steps thus
cover the warm-up (backbone frozen, BatchNorm statistics updating), the switch to the main
optimiser (a fresh Adam in the authors' code) and a schedule event.

Tolerance: 1e-10 on every parameter, buffer, loss and learning rate, in units of each tensor's
scale ``max(1, max |value|)``. Both sides compute in float64 (unit roundoff 1.1e-16), with
different operation orders (the loss's distance and softmax, the pooling, the LayerNorm), so they
differ by rounding: 3.8e-15 at most over the 5 steps (Intel Xeon Ice Lake, AVX-512). 1e-10 leaves
four orders for other CPUs' rounding and is five orders below the smallest recipe difference this
test guards (Adam's beta2 0.99 instead of 0.999: 1.1e-5 in the parameters after the second main
step, 1.9e-4 after the last; with the optimiser kept across the switch: 0.48 at the first main
step, 1.03 at the last).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import logging
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from gspdml.config import load_config
from gspdml.data import DataSplits
from gspdml.data.base import EvalSplit
from gspdml.data.seeded import SeededTransformDataset
from gspdml.losses import build_loss
from gspdml.models import build_embedder
from gspdml.training import Callback, RunParts, Trainer, validation

VENDOR = Path(__file__).parent / "vendor" / "proxynca_pp"
WARMUP_EPOCHS, MAIN_EPOCHS = 1, 4  # one batch per epoch
PATIENCE = 1
SCORES = [0.5, 0.50001, 0.50002, 0.50003]  # validation R@1 after each main epoch
CLASSES, BATCH_CLASSES, PER_CLASS, IMAGE = 16, 3, 2, 32  # 16 proxies, batches of 3 x 2
TOLERANCE = 1e-10
#: the residual branches' last BatchNorm scale starts at a tenth: at He initialisation with full
#: branches a 50-layer ResNet with batch statistics of 6 images multiplies rounding differences by
#: ~50 at every backbone step (chaotic), so the comparison would measure that, not the recipe
RESIDUAL_SCALE = 0.1
#: the authors' modules, imported from the vendored folder (and removed again after the test)
VENDORED = ("loss", "networks", "similarity", "utils")


class Images(torch.utils.data.Dataset):
    """Fixed float64 images: ``PER_CLASS`` of each of ``CLASSES`` classes."""

    def __init__(self, classes: int, seed: int):
        gen = torch.Generator().manual_seed(seed)
        self.labels = np.repeat(np.arange(classes), PER_CLASS)
        self.images = torch.randn(len(self.labels), 3, IMAGE, IMAGE, generator=gen).double()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.images[index], int(self.labels[index])


class Recorder(Callback):
    """gspdml's state after every step: parameters and buffers by the authors' names, the loss,
    the learning rates the step ran at (embedding layer, proxies)."""

    def __init__(self, model: nn.Module, loss: nn.Module):
        self.steps: list[dict[str, torch.Tensor]] = []
        self.batches: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.losses: list[torch.Tensor] = []
        model.register_forward_pre_hook(self._images)
        loss.register_forward_pre_hook(self._labels)
        loss.register_forward_hook(lambda module, args, out: self.losses.append(out.detach()))

    def _images(self, module, args):
        if module.training:
            self.batches.append((args[0].detach().clone(), None))

    def _labels(self, module, args):
        self.batches[-1] = (self.batches[-1][0], args[1].detach().clone())

    def on_step_end(self, trainer) -> None:
        groups = {g["name"]: g["lr"] for g in trainer.optimizer.param_groups}
        self.steps.append(
            {
                **{
                    f"0.base.{k}": v.clone() for k, v in trainer.model.backbone.state_dict().items()
                },
                "1.weight": trainer.model.projection.weight.detach().clone(),
                "1.bias": trainer.model.projection.bias.detach().clone(),
                "proxies": trainer.loss.proxies.detach().clone(),
                "loss": self.losses[-1],
                "lr embedding": torch.tensor(groups["projection"]),
                "lr proxies": torch.tensor(groups["loss x100000"]),
            }
        )


def gspdml_run(tmp_path: Path):
    """gspdml's proxynca-cub preset, scaled to the test, through the Trainer; returns the
    recorder and the initial model, head and proxies."""
    config = load_config(
        "proxynca-cub",
        [
            "model.backbone.pretrained=false",
            f"data.classes_per_batch={BATCH_CLASSES}",
            f"data.samples_per_class={PER_CLASS}",
            "data.num_workers=0",
            f"schedule.warmup_steps={WARMUP_EPOCHS}",
            f"schedule.max_steps={WARMUP_EPOCHS + MAIN_EPOCHS}",
            f"schedule.plateau.patience={PATIENCE}",
            "evaluation.every=1",  # one batch per epoch: a validation round per epoch
            "evaluation.baseline=false",
            "trainer.device=cpu",
            "trainer.progress=false",
            "trainer.tensorboard=false",
        ],
    )
    torch.manual_seed(0)
    model = build_embedder(config.model.to_dict(), 3).double()
    with torch.no_grad():
        for name, param in model.backbone.named_parameters():
            if name.endswith("bn3.weight"):
                param.mul_(RESIDUAL_SCALE)
    loss = build_loss(
        config.loss, "loss", embedding_dim=config.model.embedding_dim, num_classes=CLASSES
    ).double()
    initial = copy.deepcopy(model), copy.deepcopy(loss)
    train = SeededTransformDataset(Images(CLASSES, seed=1), seed=0)
    val = EvalSplit(SeededTransformDataset(Images(2, seed=2), seed=0))
    recorder = Recorder(model, loss)
    parts = RunParts(model, loss, DataSplits(train, val=val), callbacks={"recorder": recorder})
    trainer = Trainer(parts, config, tmp_path / "run")
    rounds: list[int] = []

    def scripted_round(split, model=None, metrics=None):
        rounds.append(trainer.step)  # a round in the warm-up reads the first main epoch's score
        return {"precision_at_1": SCORES[max(trainer.step - WARMUP_EPOCHS, 1) - 1]}

    trainer.evaluate_round = scripted_round
    trainer.fit()
    return recorder, initial, rounds


class EpochBatches:
    """``dl_tr`` of the authors' loops: epoch ``e`` yields the batches gspdml's step ``e`` took."""

    def __init__(self, batches, classes: int):
        self.batches = iter(batches)
        self.dataset = types.SimpleNamespace(nb_classes=lambda: classes)

    def __len__(self) -> int:
        return 1

    def __iter__(self):
        images, labels = next(self.batches)
        yield images, labels, None


def authors_run(monkeypatch, batches, initial):
    """The vendored train.py segments, executed as they are; returns the state after each step."""
    backbone = initial[0].backbone
    models = types.ModuleType("torchvision.models")
    models.resnet50 = lambda pretrained: copy.deepcopy(backbone)  # gspdml's has torchvision's names
    monkeypatch.setitem(sys.modules, "torchvision", types.ModuleType("torchvision"))
    monkeypatch.setitem(sys.modules, "torchvision.models", models)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(nn.Module, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(  # DataParallel calls the module itself where it sees no accelerator
        importlib.import_module("torch.nn.parallel.data_parallel"),
        "_get_available_device_type",
        lambda: None,
    )
    monkeypatch.syspath_prepend(str(VENDOR))
    for name in VENDORED:  # a module of that name imported elsewhere is put back afterwards
        monkeypatch.setitem(sys.modules, name, None)
        del sys.modules[name]
    import utils  # the vendored utils.py

    config = utils.load_config(str(VENDOR / "config" / "cub.json"))
    config["lr_scheduler"]["args"]["patience"] = PATIENCE
    scores = iter(SCORES)
    namespace = {
        "torch": torch,
        "np": np,
        "time": time,
        "logging": logging,
        "config": config,
        "args": argparse.Namespace(
            nb_epochs=MAIN_EPOCHS,
            sz_embedding=config["sz_embedding"],
            warmup_k=WARMUP_EPOCHS,
            no_warmup=False,
            apex=False,
            mode="train",
            eval_nmi=False,
            recall=[1, 2, 4, 8],
            init_eval=False,
        ),
        "dl_tr": EpochBatches(batches, CLASSES),
        "dl_val": None,
        "results": {},
        # the validation R@1 gspdml is fed; NMI is 1 without --eval_nmi, as in utils.evaluate
        "utils": types.SimpleNamespace(evaluate=lambda *a: (1, [next(scores)] * 4)),
    }
    model_code, optimisation_code, training_code = segments()
    exec(model_code, namespace)
    feat, emb = namespace["feat"], namespace["emb"]
    emb.load_state_dict(initial[0].projection.state_dict())
    exec(optimisation_code, namespace)
    namespace["criterion"].proxies.data.copy_(initial[1].proxies)
    steps: list[dict[str, torch.Tensor]] = []
    losses: list[torch.Tensor] = []
    namespace["criterion"].register_forward_hook(lambda m, a, out: losses.append(out.detach()))

    def record(optimizer, args, kwargs):
        steps.append(
            {
                **{f"0.base.{k}": v.clone() for k, v in feat.base.state_dict().items()},
                "1.weight": emb.weight.detach().clone(),
                "1.bias": emb.bias.detach().clone(),
                "proxies": namespace["criterion"].proxies.detach().clone(),
                "loss": losses[-1],
                "lr embedding": torch.tensor(optimizer.param_groups[1]["lr"]),
                "lr proxies": torch.tensor(optimizer.param_groups[2]["lr"]),
            }
        )

    namespace["opt_warmup"].register_step_post_hook(record)
    namespace["opt"].register_step_post_hook(record)
    exec(training_code, namespace)
    assert next(scores, None) is None, "every main epoch was validated once"
    return steps


def segments() -> list[str]:
    """The three segments of the vendored train.py excerpt."""
    text = (VENDOR / "train.py").read_text()
    parts = [part.split("\n", 1) for part in text.split("# ==== segment: ")[1:]]
    assert [title.split(" ", 1)[0] for title, _ in parts] == ["model", "optimisation", "training"]
    return [code for _, code in parts]


@pytest.fixture
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def relative_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """``max |ours - theirs|`` over the tensor, in units of its scale ``max(1, max |theirs|)``
    (BatchNorm's running variances of a randomly initialised ResNet-50 reach 1e3)."""
    scale = max(1.0, float(theirs.double().abs().max()))
    return float((ours.double() - theirs.double()).abs().max()) / scale


def differences(ours: list[dict], theirs: list[dict]) -> list[dict[str, float]]:
    """Per step: the largest absolute difference of each compared quantity."""
    assert len(ours) == len(theirs) == WARMUP_EPOCHS + MAIN_EPOCHS
    out = []
    for a, b in zip(ours, theirs):
        assert a.keys() == b.keys()
        out.append({k: relative_difference(a[k], b[k]) for k in a})
    return out


@pytest.mark.slow
def test_proxynca_cub_steps_equal_the_authors_code(tmp_path, monkeypatch, float64):
    # writing a 25M-parameter float64 checkpoint at every round does not change the steps
    # (resuming exactly is tests/training/test_trainer_resume.py's); here it would cost seconds.
    # With no weights file written, results.json's digest of it (run_identity, tested in
    # tests/training/test_run_identity.py) has nothing to read: it is left out too.
    monkeypatch.setattr(Trainer, "_save_checkpoint", lambda self: None)
    monkeypatch.setattr(validation, "save_weights", lambda *a, **k: None)
    monkeypatch.setattr(validation, "identity", lambda run_dir: {})
    recorder, initial, rounds = gspdml_run(tmp_path)
    theirs = authors_run(monkeypatch, list(recorder.batches), initial)
    per_step = differences(recorder.steps, theirs)
    summary = [
        {
            "parameters": max(v for k, v in step.items() if k not in ("loss",) and " " not in k),
            "loss": step["loss"],
            "lr": max(step["lr embedding"], step["lr proxies"]),
        }
        for step in per_step
    ]
    assert all(max(step.values()) <= TOLERANCE for step in summary), summary
    # train.py validates after each main epoch only: no round (selection, plateau) in the warm-up
    assert rounds == list(range(WARMUP_EPOCHS + 1, WARMUP_EPOCHS + MAIN_EPOCHS + 1))
    # the schedule event happened on both sides: the last step ran at a tenth of the rate
    lrs = [float(step["lr proxies"]) for step in recorder.steps]
    assert lrs == pytest.approx([400.0] * (WARMUP_EPOCHS + MAIN_EPOCHS - 1) + [40.0])
