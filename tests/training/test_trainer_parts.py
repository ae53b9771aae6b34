"""Objects-first training: a user's dataset, embedder and loss train through
``Trainer(parts, config, run_dir)`` (docs/design.md, "Contracts"); what a trainer checks once
before step 1 from the parts' declarations; callback state and counters on resume."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from gspdml.config import load_config
from gspdml.data import DataSplits
from gspdml.data.base import EvalSplit
from gspdml.data.seeded import SeededTransformDataset
from gspdml.errors import ConfigError, DataError
from gspdml.losses import build_loss
from gspdml.models.freezable import Freezable
from gspdml.models.output import EmbedderOutput
from gspdml.pooling.base import LazyInitialised
from gspdml.training import Callback, RunParts, TensorEmbedder, Trainer
from gspdml.training.baseline import NO_BACKBONE
from gspdml.training.checkpoint import CheckpointError, load_state, save_state
from gspdml.training.optim import Schedules, StepDecay


class Blobs(Dataset):
    """A user's dataset as the conventions describe it: integer indices, ``(image, label)`` items;
    ``labels`` only when ``with_labels``. Each class is a constant colour plus noise."""

    def __init__(self, classes, per_class, seed, with_labels=True):
        gen = torch.Generator().manual_seed(seed)
        self.items = [
            (torch.randn(3, 1, 1, generator=gen) + 0.3 * torch.randn(3, 8, 8, generator=gen), c)
            for c in classes
            for _ in range(per_class)
        ]
        if with_labels:
            self.labels = torch.tensor([label for _, label in self.items]).numpy()

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


class Net(nn.Module):
    """A user's embedder: returns the embedding tensor."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 8)

    def forward(self, images):
        return F.normalize(self.fc(self.conv(images).relu().mean(dim=(2, 3))), dim=1)


class Contrastive(nn.Module):
    """A user's loss: ``forward(embeddings, labels)``."""

    def forward(self, embeddings, labels):
        distances = torch.cdist(embeddings, embeddings)
        same = labels[:, None] == labels[None, :]
        return distances[same].pow(2).mean() + F.relu(0.8 - distances[~same]).pow(2).mean()


def make_net():
    """The factory the runs of these tests name (``model.factory``): the model they train."""
    return TensorEmbedder(Net())


def lazy_net():
    return TensorEmbedder(nn.Sequential(Net(), LazyShift(needed=24)))


FACTORY = f"{__name__}:make_net"


def user_data(with_labels=True):
    train = SeededTransformDataset(Blobs(range(6), 8, seed=0, with_labels=with_labels), seed=1)
    return DataSplits(
        train, EvalSplit(Blobs(range(6, 10), 5, seed=2)), EvalSplit(Blobs(range(10, 14), 5, seed=3))
    )


def config_for(make_config, **sections):
    """A config for a user's model (``model.factory``: :func:`make_net`) unless ``model`` says
    otherwise."""
    sections.setdefault("model", {"factory": FACTORY})
    base = {
        "data": {"classes_per_batch": 3, "samples_per_class": 4},
        "schedule": {"max_steps": 12},
        "evaluation": {"every": 4, "patience": None},
        "optimizer": {"lr": 1e-2},
    }
    return load_config(make_config(**{**base, **sections}))


@pytest.mark.parametrize("with_labels", [True, False])
def test_a_user_dataset_embedder_and_loss_train_end_to_end(make_config, tmp_path, with_labels):
    """Fails on the old trainer, which took only a config (and indexed a plain dataset with
    ``(index, epoch)``: IndexError at step 1)."""
    torch.manual_seed(0)
    net = Net()
    before = net.fc.weight.detach().clone()
    parts = RunParts(TensorEmbedder(net), Contrastive(), user_data(with_labels))
    trainer = Trainer(parts, config_for(make_config), tmp_path / "run")
    first = trainer.evaluate(trainer.eval_split)["map_at_r"]
    results = trainer.fit()
    assert results["steps"] == 12 and 0.0 <= results["test"]["map_at_r"] <= 1.0
    assert not torch.equal(before, net.fc.weight)
    assert trainer.selection.best_metric >= first
    assert [g["name"] for g in trainer.optimizer.param_groups] == ["model"]


def test_a_plain_dataset_is_refused_before_step_1_naming_the_adapter(make_config, tmp_path):
    data = user_data()
    data.train = Blobs(range(6), 8, seed=0)  # not adapted: takes integer indices only
    with pytest.raises(DataError, match=r"\(index, epoch\) keys.*SeededTransformDataset"):
        Trainer(
            RunParts(TensorEmbedder(Net()), Contrastive(), data),
            config_for(make_config),
            tmp_path / "run",
        )


def test_a_loss_reading_an_output_field_the_model_lacks_is_refused_before_step_1(
    make_config, tmp_path
):
    zsr = build_loss({"name": "zsr", "base": "c2"}, embedding_dim=8, num_classes=6)
    parts = RunParts(TensorEmbedder(Net()), zsr, user_data())
    config = config_for(
        make_config, data={"classes_per_batch": 4, "samples_per_class": 2, "halves": True}
    )
    with pytest.raises(
        ConfigError, match="model.pooling: the loss reads the embedder output's attributes.*gsp"
    ):
        Trainer(parts, config, tmp_path / "run")


class LazyShift(LazyInitialised, nn.Module):
    """A user module that initialises a shift from the first ``needed`` samples it sees."""

    def __init__(self, needed):
        super().__init__()
        self.needed, self.seen, self.finished_at = needed, 0, None
        self.shift = nn.Parameter(torch.zeros(8))

    @property
    def is_initialised(self):
        return self.finished_at is not None

    @property
    def samples_needed(self):
        return self.needed

    @property
    def samples_seen(self):
        return self.seen

    def finish_initialisation(self):
        self.finished_at = self.seen
        return self.seen

    def forward(self, x):
        if self.training and not self.is_initialised:
            self.seen += len(x)
        return x + self.shift


def test_a_user_lazily_initialised_module_is_checked_and_finished_before_the_first_evaluation(
    make_config, tmp_path
):
    net = nn.Sequential(Net(), LazyShift(needed=24))
    config = config_for(
        make_config, schedule={"max_steps": 4}, model={"factory": f"{__name__}:lazy_net"}
    )
    Trainer(RunParts(TensorEmbedder(net), Contrastive(), user_data()), config, tmp_path / "a").fit()
    assert net[1].finished_at == 4 * 12  # 4 steps of 3 x 4 samples, finished at the first round
    late = nn.Sequential(Net(), LazyShift(needed=49))
    with pytest.raises(
        ConfigError, match="evaluation.every: module.1 needs 49 training samples.*only 48"
    ):
        Trainer(RunParts(TensorEmbedder(late), Contrastive(), user_data()), config, tmp_path / "b")


def test_a_user_model_reloads_by_its_factory_or_is_refused_before_step_1(make_config, tmp_path):
    """A model the config's model section does not describe is refused without a factory (it
    was saved under ``backbone: small_cnn`` and failed to reload with a raw Missing keys); with
    ``model.factory`` it trains and ``load_run`` gives the same embeddings."""
    from gspdml.training import load_run

    config = config_for(make_config, schedule={"max_steps": 4}, model={"factory": None})
    with pytest.raises(ConfigError, match="model: the trainer got a TensorEmbedder.*model.factory"):
        Trainer(RunParts(make_net(), Contrastive(), user_data()), config, tmp_path / "refused")
    assert not (tmp_path / "refused" / "model.safetensors").exists()

    other = config_for(make_config, model={"factory": f"{__name__}:lazy_net"})
    with pytest.raises(ConfigError, match="model.factory: .*parameters differ"):
        Trainer(RunParts(make_net(), Contrastive(), user_data()), other, tmp_path / "other")

    # a script's own function: another process's __main__ is another program
    script = config_for(make_config, model={"factory": "__main__:make_net"})
    with pytest.raises(ConfigError, match="model.factory: '__main__:make_net' is a function of"):
        Trainer(RunParts(make_net(), Contrastive(), user_data()), script, tmp_path / "script")

    torch.manual_seed(0)
    model = make_net()
    config = config_for(make_config, schedule={"max_steps": 4})
    Trainer(RunParts(model, Contrastive(), user_data()), config, tmp_path / "run").fit()
    saved, reloaded = load_run(tmp_path / "run")
    assert saved.model.factory == FACTORY
    images = torch.randn(5, 3, 8, 8, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        torch.testing.assert_close(reloaded(images).embedding, model.eval()(images).embedding)


class Tally(Callback):
    """Stateful: adds ``increment`` at every step; crashes after step ``crash_at`` if given."""

    def __init__(self, increment, crash_at=None):
        self.increment, self.total, self.crash_at = increment, 0, crash_at

    def on_step_end(self, trainer):
        self.total += self.increment
        if trainer.step == self.crash_at:
            raise KeyboardInterrupt

    def callback_state(self):
        return {"total": torch.tensor(self.total)}

    def load_callback_state(self, state):
        self.total = int(state["total"])


def test_callback_state_is_restored_by_name_not_position(make_config, tmp_path):
    """Fails on the old trainer, which restored callback state by position."""
    config = config_for(make_config, model={})
    first = {"ones": Tally(1), "tens": Tally(10, crash_at=6)}
    with pytest.raises(KeyboardInterrupt):  # after step 6; the last checkpoint is step 4's
        Trainer.from_config(config, tmp_path / "run", callbacks=first).fit()
    second = {"tens": Tally(10), "ones": Tally(1)}  # another order
    resumed = Trainer.from_config(config, tmp_path / "run", resume=True, callbacks=second)
    assert (second["ones"].total, second["tens"].total) == (4, 40)
    resumed.fit()
    assert (second["ones"].total, second["tens"].total) == (12, 120)


def test_a_crafted_checkpoint_cannot_set_other_trainer_attributes(make_config, tmp_path):
    """Fails on the old trainer, which set every key of the checkpoint's trainer state."""
    config = config_for(make_config, schedule={"max_steps": 4}, model={})
    Trainer.from_config(config, tmp_path / "run").fit()
    path = tmp_path / "run" / "checkpoints" / "last.safetensors"
    state, meta = load_state(path)
    state["trainer"]["checkpoint_path"] = str(tmp_path / "elsewhere")
    save_state(path, state, meta)
    with pytest.raises(CheckpointError, match=r"unknown trainer state \['checkpoint_path'\]"):
        Trainer.from_config(config, tmp_path / "run", resume=True)


class CountingSGD(torch.optim.SGD):
    """A user's optimiser: plain SGD that counts its steps."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def test_an_injected_optimiser_and_schedule_are_the_ones_stepping(make_config, tmp_path):
    """Fails on the old trainer, which took no optimiser (TypeError) and always built Adam."""
    torch.manual_seed(0)
    model = make_net()
    optimizer = CountingSGD(model.parameters(), lr=0.5)
    schedules = Schedules(step_decay=StepDecay(optimizer, factor=0.1, every=5))
    config = config_for(make_config, schedule={"max_steps": 12})
    parts = RunParts(model, Contrastive(), user_data())
    trainer = Trainer(parts, config, tmp_path / "run", optimizer=optimizer, schedules=schedules)
    assert trainer.optimizer is optimizer
    before = [p.detach().clone() for p in model.parameters()]
    trainer.fit()
    assert optimizer.steps == 12  # one step per training step, none by a built Adam
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * 0.1**2)  # decayed at 5, 10
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_resume_restores_the_optimiser_it_is_given_and_the_default_one(make_config, tmp_path):
    """A run stopped after step 6 and resumed ends with the weights of an uninterrupted run,
    with an injected optimiser (its momentum restored from the checkpoint) and with the one the
    config builds."""
    config = config_for(make_config, schedule={"max_steps": 12})

    def run(folder, injected, crash_at=None, resume=False):
        torch.manual_seed(0)
        model = make_net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9) if injected else None
        parts = RunParts(model, Contrastive(), user_data(), callbacks={"tally": Tally(1, crash_at)})
        trainer = Trainer(parts, config, folder, optimizer=optimizer, resume=resume)
        trainer.fit()
        return trainer

    for injected in (True, False):
        straight = run(tmp_path / f"straight{injected}", injected)
        with pytest.raises(KeyboardInterrupt):  # after step 6; the last checkpoint is step 4's
            run(tmp_path / f"stopped{injected}", injected, crash_at=6)
        resumed = run(tmp_path / f"stopped{injected}", injected, resume=True)
        assert resumed.step == straight.step == 12
        assert type(resumed.optimizer) is (torch.optim.SGD if injected else torch.optim.Adam)
        for a, b in zip(straight.model.parameters(), resumed.model.parameters()):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_backbone_baseline_of_a_model_without_a_declared_backbone_is_skipped_with_why(
    make_config, tmp_path, capsys
):
    """The config names pre-trained backbone weights, the user's model has no backbone: the
    step-0 baseline is evaluated, the backbone baseline is recorded as skipped with its reason
    (the old trainer raised AttributeError: 'TensorEmbedder' object has no attribute
    'backbone')."""
    backbone = {"name": "small_cnn", "widths": [8, 16], "weights": "smoke-small_cnn-digits"}
    config = config_for(
        make_config, model={"factory": FACTORY, "backbone": backbone}, schedule={"max_steps": 4}
    )
    assert config.model.pretrained_backbone
    results = Trainer(
        RunParts(make_net(), Contrastive(), user_data()), config, tmp_path / "r"
    ).fit()
    assert results["baseline"]["step0"].keys() == results["test"].keys()
    assert "backbone_gap" not in results["baseline"]
    assert results["baseline_skipped"] == {"backbone_gap": NO_BACKBONE}
    assert f"gspdml: baseline: backbone_gap skipped ({NO_BACKBONE})" in capsys.readouterr().err


class UndeclaredBackboneNet(nn.Module):
    """A user's model with a ``backbone`` attribute, which alone declares nothing."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 8)

    def forward(self, images):
        return EmbedderOutput(F.normalize(self.fc(self.backbone(images).mean(dim=(2, 3))), dim=1))


class UserBackboneNet(UndeclaredBackboneNet):
    """The same model declaring its backbone (:class:`Freezable`)."""

    feature_cache = None
    backbone_frozen = False


def test_the_warm_up_freezes_a_declared_user_backbone_and_refuses_an_undeclared_one(
    make_config, tmp_path
):
    declared, undeclared = (
        config_for(
            make_config,
            model={"factory": f"{__name__}:{net.__name__}"},
            schedule={"max_steps": 4, "warmup_steps": 2},
        )
        for net in (UserBackboneNet, UndeclaredBackboneNet)
    )
    model = UserBackboneNet()
    assert isinstance(model, Freezable) and not isinstance(make_net(), Freezable)
    trainer = Trainer(RunParts(model, Contrastive(), user_data()), declared, tmp_path / "a")
    trainer._freeze_backbone(True)
    assert not any(p.requires_grad for p in model.backbone.parameters())
    assert all(p.requires_grad for p in model.fc.parameters())
    trainer._freeze_backbone(False)
    assert all(p.requires_grad for p in model.backbone.parameters())
    with pytest.raises(ConfigError, match="schedule.warmup_steps: .*UndeclaredBackboneNet has no"):
        Trainer(RunParts(UndeclaredBackboneNet(), Contrastive(), user_data()), undeclared, tmp_path)
