"""The training loop: class-balanced batches, optimiser groups, validation rounds with early
stopping and restore-best, reduce-on-plateau, atomic checkpoints and exact resume.

A run directory holds ``config.yaml`` (the resolved config), ``metrics.jsonl`` (one JSON object
per line: train losses and validation rounds), ``checkpoints/last.safetensors`` (everything needed
to resume: weights, optimiser moments, sampler position, RNG states, counters, callback state),
``checkpoints/best.safetensors`` (the best weights so far), ``model.safetensors`` (the final
weights) and ``results.json`` (test metrics). ``resume=True`` continues a killed run from its last
checkpoint and ends with the same weights as an uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from gspdml.config import dump_config
from gspdml.data import build_data
from gspdml.data.samplers import ClassBalancedBatchSampler
from gspdml.errors import ConfigError, TrainingError
from gspdml.losses import build_loss
from gspdml.models import Embedder, build_embedder
from gspdml.training.callbacks import Callback
from gspdml.training.checkpoint import atomic_write_text, load_state, save_state
from gspdml.training.inference import autocast_context, embed, evaluate_split, resolve_device
from gspdml.training.metrics_log import MetricsLog
from gspdml.training.optim import PlateauSchedule, build_optimizer
from gspdml.training.weights import save_weights


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Trains one run described by a resolved config (see :mod:`gspdml.config`).

    Public attributes used by callbacks: ``config``, ``model``, ``loss``, ``optimizer``,
    ``train_dataset``, ``device``, ``step``, :meth:`embed` and :meth:`evaluate`.
    """

    def __init__(self, config: dict[str, Any], run_dir: Path | str, *, resume: bool = False):
        self.config, self.run_dir = config, Path(run_dir)
        self.checkpoint_path = self.run_dir / "checkpoints" / "last.safetensors"
        self.best_path = self.run_dir / "checkpoints" / "best.safetensors"
        if not resume and self.checkpoint_path.exists():
            raise ConfigError("name", f"{self.run_dir} already holds a run; resume it (--resume) or choose another name")
        if resume and not self.checkpoint_path.exists():
            raise ConfigError("name", f"nothing to resume: no checkpoint in {self.run_dir}")
        seed_everything(int(config["seed"]))
        self.device = resolve_device(config["trainer"]["device"])
        self.precision = config["trainer"]["precision"]
        if self.precision == "fp16" and self.device.type != "cuda":
            raise ConfigError("trainer.precision", "fp16 needs a CUDA device; use bf16 on CPU")
        self.data = build_data(config["data"]["dataset"], seed=int(config["seed"]))
        self.train_dataset = self.data.train
        self.eval_split = self.data.val if config["evaluation"]["split"] == "val" else self.data.test
        if self.eval_split is None:
            raise ConfigError("evaluation.split", f"dataset {config['data']['dataset']['name']!r} has no {config['evaluation']['split']} split")
        self.model: Embedder = build_embedder(config["model"], self.data.channels).to(self.device)
        if self.precision == "bf16" and self.device.type == "cpu":
            self.model = self.model.to(memory_format=torch.channels_last)
        self.loss = build_loss(config["loss"], "loss", embedding_dim=self.model.embedding_dim, num_classes=self.data.num_classes).to(self.device)
        data_cfg = config["data"]
        self.sampler = ClassBalancedBatchSampler(
            self.train_dataset.labels, data_cfg["classes_per_batch"], data_cfg["samples_per_class"],
            halves=bool(data_cfg["halves"]), replacement=bool(data_cfg["replacement"]), seed=int(config["seed"]),
            with_epoch=True,  # items are (index, epoch): augmentation is a function of (seed, epoch, index)
        )
        self.optimizer = build_optimizer(config["optimizer"], self.model, self.loss)
        plateau = config["schedule"]["plateau"]
        self.plateau = PlateauSchedule(self.optimizer, float(config["optimizer"]["lr"]), **plateau) if plateau else None
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.callbacks: list[Callback] = _unique(m for part in (self.model, self.loss) for m in part.modules() if isinstance(m, Callback))
        self.step = 0
        self.best_metric, self.best_step, self.bad_rounds = float("-inf"), 0, 0
        self.stopped_early = self.finished = False
        self.log = MetricsLog(self.run_dir / "metrics.jsonl")
        if resume:
            self._restore(load_state(self.checkpoint_path)[0])
            self.log.truncate_after(self.step)
        else:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.run_dir / "config.yaml", dump_config(config))
            self.log.truncate_after(-1)

    # ------------------------------------------------------------------ public helpers
    def embed(self, dataset) -> tuple[torch.Tensor, torch.Tensor]:
        """Embeddings and labels of ``dataset`` with the current model (eval mode)."""
        return embed(self.model, dataset, self.config["data"]["eval_batch_size"], self.device, self.precision, self.config["data"]["num_workers"])

    def evaluate(self, split) -> dict[str, float]:
        return evaluate_split(
            self.model, split, batch_size=self.config["data"]["eval_batch_size"], device=self.device,
            precision=self.precision, recall_at=self.config["evaluation"]["recall_at"], num_workers=self.config["data"]["num_workers"],
        )

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, Any]:
        """Train until ``schedule.max_steps`` or early stopping; then restore the best weights,
        save them and evaluate the test split. Returns the content of ``results.json``."""
        cfg = self.config
        max_steps, every = cfg["schedule"]["max_steps"], cfg["evaluation"]["every"]
        for callback in self.callbacks:
            callback.on_train_start(self)
        bar = tqdm(total=max_steps, initial=self.step, disable=not cfg["trainer"]["progress"], desc=cfg["name"], dynamic_ncols=True)
        while not self.finished:
            for images, labels in self._loader():  # the rest of the current epoch
                loss = self._train_step(images, labels)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", best=f"{self.best_metric:.4f}")
                if self.step % every == 0 or self.step >= max_steps:
                    self._validation_round()
                if self.finished:
                    break
        bar.close()
        return self._finish()

    def _loader(self) -> DataLoader:
        """Batches from the one after the last consumed batch (one batch per step) to the end of
        its epoch; positioning by the step count stays exact with workers that read ahead."""
        self.sampler.advance_to(self.step)
        workers = self.config["data"]["num_workers"]
        return DataLoader(self.train_dataset, batch_sampler=self.sampler, num_workers=workers,
                          pin_memory=self.device.type == "cuda", persistent_workers=False)

    def _train_step(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        cfg = self.config
        self.model.train()
        self.loss.train()
        self._freeze_backbone(self.step < cfg["schedule"]["warmup_steps"])
        images, labels = images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)
        if self.precision == "bf16" and self.device.type == "cpu":
            images = images.contiguous(memory_format=torch.channels_last)
        with autocast_context(self.precision, self.device):
            loss = self.loss.training_objective(self.model, images, labels)
        if not torch.isfinite(loss):
            raise TrainingError(
                f"non-finite loss ({loss.item()}) at step {self.step + 1}; training stopped, "
                f"the last good checkpoint {self.checkpoint_path} is intact"
            )
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        for callback in self.callbacks:
            callback.on_after_backward(self)
        clip = cfg["optimizer"]["grad_clip_norm"]
        if clip:
            torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]], clip)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.step += 1
        for callback in self.callbacks:
            callback.on_step_end(self)
        value = float(loss.detach())
        if self.step % cfg["trainer"]["log_every"] == 0:
            self.log.write({"step": self.step, "split": "train", "loss": value, "lr": self.optimizer.param_groups[0]["lr"]})
        return value

    def _freeze_backbone(self, frozen: bool) -> None:
        for param in self.model.backbone.parameters():
            param.requires_grad_(not frozen)

    def _validation_round(self) -> None:
        ev = self.config["evaluation"]
        metrics = self.evaluate(self.eval_split)
        value = metrics[ev["metric"]]
        if value > self.best_metric:
            self.best_metric, self.best_step, self.bad_rounds = value, self.step, 0
            save_weights(self.best_path, self.model, self.data.channels, self.config)
        else:
            self.bad_rounds += 1
        self.log.write({"step": self.step, "split": ev["split"], **metrics, "best": self.best_metric})
        if self.plateau:
            self.plateau.step(value)
        for callback in self.callbacks:
            callback.on_evaluation(self, metrics)
        patience = ev["patience"]
        self.stopped_early = bool(patience) and self.bad_rounds >= patience
        self.finished = self.stopped_early or self.step >= self.config["schedule"]["max_steps"]
        self._save_checkpoint()

    def _finish(self) -> dict[str, Any]:
        cfg = self.config
        if cfg["evaluation"]["restore_best"] and self.best_path.exists():
            state, _ = load_state(self.best_path, self.device)
            self.model.load_state_dict(state)
        save_weights(self.run_dir / "model.safetensors", self.model, self.data.channels, cfg)
        results: dict[str, Any] = {
            "name": cfg["name"], "steps": self.step, "best_step": self.best_step,
            "best_" + cfg["evaluation"]["metric"]: self.best_metric, "stopped_early": self.stopped_early,
        }
        if self.data.test is not None:
            results["test"] = self.evaluate(self.data.test)
            self.log.write({"step": self.step, "split": "test", **results["test"]})
        atomic_write_text(self.run_dir / "results.json", json.dumps(results, indent=2))
        return results

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self) -> None:
        state = {
            "model": self.model.state_dict(),
            "loss": self.loss.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "plateau": self.plateau.state_dict() if self.plateau else None,
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "trainer": {
                "step": self.step, "best_metric": self.best_metric, "best_step": self.best_step, "bad_rounds": self.bad_rounds,
                "stopped_early": self.stopped_early, "finished": self.finished,
            },
            "rng": _rng_state(),
            "callbacks": [c.callback_state() for c in self.callbacks],
        }
        save_state(self.checkpoint_path, state, {"step": self.step})

    def _restore(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.plateau and state["plateau"]:
            self.plateau.load_state_dict(state["plateau"])
        if self.scaler and state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])
        for key, value in state["trainer"].items():
            setattr(self, key, value)
        for callback, callback_state in zip(self.callbacks, state["callbacks"]):
            callback.load_callback_state(callback_state)
        _set_rng_state(state["rng"])


def _unique(items: Iterable[Callback]) -> list[Callback]:
    seen, out = set(), []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


def _rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def train(config: dict[str, Any], run_dir: Optional[Path | str] = None, resume: bool = False) -> dict[str, Any]:
    """Train the run described by a resolved config; returns the test results (``results.json``)."""
    run_dir = Path(run_dir) if run_dir is not None else Path(config["output_dir"]) / config["name"]
    return Trainer(config, run_dir, resume=resume).fit()
