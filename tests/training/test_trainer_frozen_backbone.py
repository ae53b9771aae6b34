"""The frozen regime through real training steps: no gradient reaches the backbone."""

import torch

from gspdml.config import load_config
from gspdml.training.trainer import Trainer

SMOKE = [
    "trainer.progress=false",
    "data.dataset.images_per_class=4",
    "schedule.max_steps=2",
    "evaluation.every=2",
    "model.backbone={name: small_cnn, widths: [8, 16], weights: smoke-small_cnn-digits, frozen: true}",
]


def test_a_frozen_backbone_gets_no_gradient_in_training_steps(tmp_path):
    trainer = Trainer.from_config(load_config("demo-gmp", SMOKE), tmp_path / "run")
    before = {k: v.clone() for k, v in trainer.model.backbone.state_dict().items()}
    head = trainer.model.projection.weight.detach().clone()
    trainer.fit()
    backbone = trainer.model.backbone
    assert not any(p.requires_grad for p in backbone.parameters())
    assert all(p.grad is None for p in backbone.parameters())  # no backward through it
    assert all(torch.equal(before[k], v) for k, v in backbone.state_dict().items())
    assert not torch.equal(trainer.model.projection.weight, head)  # the rest trains


def test_the_warm_up_freezes_a_trainable_backbone_only_while_it_lasts(tmp_path):
    overrides = [
        *SMOKE[:-1],
        "model.backbone={name: small_cnn, widths: [8, 16], weights: smoke-small_cnn-digits}",
        "model.cache_backbone_features=false",
        "schedule.warmup_steps=1",
    ]
    trainer = Trainer.from_config(load_config("demo-gmp", overrides), tmp_path / "run")
    trainer._freeze_backbone(True)
    assert not any(p.requires_grad for p in trainer.model.backbone.parameters())
    trainer._freeze_backbone(False)
    assert all(p.requires_grad for p in trainer.model.backbone.parameters())
