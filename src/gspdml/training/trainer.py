"""The training loop: class-balanced batches, validation rounds with early stopping and
restore-best, schedules, atomic checkpoints and exact resume; what it calls lives beside it.
Under ``torchrun`` it runs data-parallel (:mod:`gspdml.training.distributed`)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, cast

import torch
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from gspdml.config import RunConfig, validated
from gspdml.data.base import EvalSplit
from gspdml.data.eval_transform import run_eval_transform
from gspdml.losses import as_metric_loss
from gspdml.models.freezable import Freezable
from gspdml.models.inference import autocast_context
from gspdml.progress import say
from gspdml.training import distributed as ddp
from gspdml.training.baseline import Baselines
from gspdml.training.batches import batch_plan, build_sampler, training_loader
from gspdml.training.callbacks import Callback
from gspdml.training.checkpoint import load_state
from gspdml.training.data_fingerprint import fingerprint
from gspdml.training.evaluator import RunEvaluator, Selection, evaluation_split
from gspdml.training.faults import FaultRecord, TrainingInterrupted, interruptible
from gspdml.training.metrics_log import MetricsLog, tensorboard_wanted
from gspdml.training.optim import Schedules, build_optimizer, build_schedules, clip_gradients
from gspdml.training.parts import RunParts, build_run, find_callbacks
from gspdml.training.preflight import check_lazy_initialisation, check_parts
from gspdml.training.resume_checks import check_same_data, run_dir_changes
from gspdml.training.run_dir import (
    BEST_WEIGHTS_FILE,
    CHECKPOINT_FILE,
    METRICS_FILE,
    TENSORBOARD_DIR,
    TIMING_FILE,
)
from gspdml.training.run_header import open_run_dir
from gspdml.training.run_lock import check_unlocked, lock_run_folder
from gspdml.training.runtime import compiled, data_parallel, start_runtime
from gspdml.training.step_timing import StepTimer, progress_bar
from gspdml.training.trainer_state import restore_checkpoint, save_checkpoint
from gspdml.training.validation import final_results, validation_round

__all__ = ["Trainer", "TrainingInterrupted", "train"]


class Trainer:
    """Trains the parts of one run (:class:`~gspdml.training.parts.RunParts`) as a resolved config
    says; ``optimizer`` and ``schedules`` replace the ones the config describes (an injected
    optimiser holds ``parts``' parameters, moved in place).

    Public attributes used by callbacks: ``config``, ``model``, ``loss``, ``optimizer``,
    ``train_dataset``, ``device``, ``step``, :meth:`embed` and :meth:`evaluate`.
    """

    def __init__(
        self,
        parts: RunParts,
        config: RunConfig | Mapping[str, Any],
        run_dir: Path | str,
        *,
        optimizer: Optional[torch.optim.Optimizer] = None,
        schedules: Optional[Schedules] = None,
        resume: bool = False,
        allow_changes: bool = False,
        allow_data_change: bool = False,
    ):
        config = validated(config)  # one built with dataclasses.replace is checked here
        self.run_dir = Path(run_dir)
        self.checkpoint_path = self.run_dir / CHECKPOINT_FILE
        self.best_path = self.run_dir / BEST_WEIGHTS_FILE
        changed = run_dir_changes(self.run_dir, config, resume, allow_changes)
        self.tensorboard = tensorboard_wanted(config.trainer.tensorboard)
        self.runtime = rt = start_runtime(config)
        self.device, self.dist, self.is_main = rt.device, rt.dist, rt.is_main
        self.precision, self.layout = rt.precision, rt.layout
        folders = [TENSORBOARD_DIR, self.checkpoint_path.parent.name]
        # one writer per run directory (rank 0 writes it), until the end of fit
        self._lock = (
            lock_run_folder(self.run_dir, folders, "gspdml train") if self.is_main else None
        )
        try:
            self._construct(parts, config, optimizer, schedules, resume, allow_data_change)
            if self.is_main:
                open_run_dir(self, resume, changed, parts.notes)
        except BaseException:
            self._release_lock()
            raise

    def _construct(
        self,
        parts: RunParts,
        config: RunConfig,
        optimizer: Optional[torch.optim.Optimizer],
        schedules: Optional[Schedules],
        resume: bool,
        allow_data_change: bool,
    ) -> None:
        """The construction steps after the run directory is locked."""
        self.data, self.train_dataset = parts.data, parts.data.train
        self.eval_split = evaluation_split(parts.data, config.evaluation.split)
        # config.yaml records the evaluation transform: search and bundles need no training data
        spec = run_eval_transform(config.data.eval_transform, parts.data)
        self.config = cfg = replace(config, data=replace(config.data, eval_transform=spec))
        self.model = parts.model.to(self.device, memory_format=self.layout)  # type: ignore[call-overload]  # torch stubs lack memory_format
        self.loss = as_metric_loss(parts.loss.to(self.device))  # RunParts made it one
        self.data_record = fingerprint(self.data)
        if resume and self.is_main and not allow_data_change:
            check_same_data(self.run_dir, self.data_record)
        self.selects = check_parts(self.model, self.loss, self.data, self.eval_split, cfg)
        self.batches = batch_plan(cfg.data, self.train_dataset.labels)
        self.sampler = build_sampler(self.batches, cfg, self.train_dataset, self.dist)
        forward_model = self.model
        if self.dist:
            self.model, forward_model = data_parallel(self.model, self.device)
        self._fault = FaultRecord(self.device)
        self._fault.watch(self.model)
        self.training_model = compiled(forward_model, cfg.trainer.compile)
        self.optimizer = optimizer or build_optimizer(cfg.optimizer, self.model, self.loss)
        self.schedules = schedules or build_schedules(cfg, self.optimizer)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.callbacks = find_callbacks(self.model, self.loss, parts.callbacks)
        self.evaluator = RunEvaluator(cfg.evaluation, cfg.data, self.runtime, self.train_dataset)
        self.selection = Selection(self.selects, cfg.evaluation.patience)
        self.baselines = Baselines()  # evaluated before step 1, checkpointed
        self.step, self.finished, self._interrupted = 0, False, False
        self._loss = torch.full((), float("nan"), device=self.device)  # read at log intervals
        self.timer = StepTimer()
        self.timing: dict[str, float] = {}  # of the last log interval
        self.log = MetricsLog(self.run_dir / METRICS_FILE)
        self.timing_log = MetricsLog(self.run_dir / TIMING_FILE)
        if resume:
            restore_checkpoint(self, load_state(self.checkpoint_path)[0])
        first = min(self._rounds_start() + cfg.evaluation.every, cfg.schedule.max_steps)
        check_lazy_initialisation(self.model, first - self.step, self.batches.size)

    @classmethod
    def from_config(
        cls,
        config: RunConfig | Mapping[str, Any],
        run_dir: Path | str,
        *,
        resume: bool = False,
        allow_changes: bool = False,
        allow_data_change: bool = False,
        callbacks: Mapping[str, Callback] | None = None,
    ) -> Trainer:
        """The trainer of the parts ``config`` describes (checked first, then built), with the
        user's ``callbacks`` (by name)."""
        config = validated(config)
        run_dir_changes(Path(run_dir), config, resume, allow_changes)
        if ddp.launched_rank() == 0:  # rank 0 alone takes the lock; the others would see it held
            check_unlocked(run_dir)  # before pre-training and data reading, which can take minutes
        parts = build_run(config, resuming=resume)  # a resume has a checkpoint (checked above)
        parts.callbacks.update(callbacks or {})
        return cls(
            parts,
            config,
            run_dir,
            resume=resume,
            allow_changes=allow_changes,
            allow_data_change=allow_data_change,
        )

    # ------------------------------------------------------------------ evaluation
    def embed(self, dataset: Dataset[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Embeddings and labels of ``dataset`` with the current model (eval mode)."""
        return self.evaluator.embed(self.model, dataset)

    def evaluate(self, split: EvalSplit) -> dict[str, float]:
        """Retrieval metrics on ``split`` (computed by rank 0 and shared with every rank)."""
        return self.evaluator.evaluate(self.model, split)

    def evaluate_round(
        self, split: EvalSplit, metrics: Optional[tuple[str, ...]] = None
    ) -> dict[str, float]:
        """The report of the run's ``evaluation`` section on ``split`` with the current model."""
        return self.evaluator.round(self.model, split, metrics)

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, Any]:
        """Train until ``schedule.max_steps`` or early stopping; then restore the best weights,
        save them and evaluate the test split. Returns the content of ``results.json``."""
        cfg, progress = self.config, self.config.trainer.progress and self.is_main
        for callback in self.callbacks.values():
            callback.on_train_start(self)
        if isinstance(self.model, Freezable) and self.model.feature_cache is not None:
            self.model.feature_cache.progress = progress  # its first pass prints progress
        bar = progress_bar(cfg.name, cfg.schedule.max_steps, self.step, progress)
        if self.step == 0 and cfg.evaluation.baseline and self.data.test is not None:
            test = self.data.test
            score = lambda m: self.evaluator.round(m, test)
            self.baselines.evaluate(self.model, cfg.model, score, self.data_record)
        try:
            with interruptible(self._request_stop):
                loader = self._loader()
                self.timer.restart()
                while not self.finished:
                    self.sampler.advance_to(self.step)
                    for images, labels in self.timer.batches(loader):  # the rest of the epoch
                        self._train_step(images, labels)
                        bar.update(1)
                        self._after_step(bar)
                        if self.finished:
                            break
            bar.close()
            results = final_results(self)
            if self.dist:  # leave together: rank 0 hosts the rendezvous store, and a rank still
                self.dist.barrier()  # tearing down when it exits is aborted
            return results
        finally:
            self.log.close()
            self.timing_log.close()
            self._release_lock()
            if self.dist:
                self.dist.close()

    def _train_step(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """One optimiser step; it does not wait for the device (its loss: :attr:`last_loss`)."""
        sched = self.config.schedule
        warming_up = self.step < sched.warmup_steps
        self.model.train()
        self.loss.train()
        if sched.fresh_optimizer_after_warmup and self.step == sched.warmup_steps > 0:
            # ProxyNCA++'s train.py warms up with one Adam and trains with a new one: the
            # moments and step counts are forgotten, the groups keep their learning rates
            self.optimizer.state.clear()
        if sched.warmup_steps:
            self._freeze_backbone(warming_up)
        images = images.to(self.device, non_blocking=True).contiguous(memory_format=self.layout)
        labels = labels.to(self.device, non_blocking=True)
        self._fault.start_step()
        with autocast_context(self.precision, self.device):
            model, labels = (
                ddp.global_batch(self.training_model, images, labels, self.dist)
                if self.dist
                else (self.training_model, labels)
            )
            # the global batch's model forwards to the model it wraps
            loss = self.loss.training_objective(cast(torch.nn.Module, model), images, labels)
        self._fault.note(self.step + 1, loss.detach(), self._fault.finite_embeddings)
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.dist:
            ddp.average_gradients(self.loss)
            if warming_up and isinstance(self.model, Freezable):
                for param in self.model.backbone.parameters():
                    param.grad = None
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        for callback in self.callbacks.values():
            callback.on_after_backward(self)
        opt = self.config.optimizer
        clip_gradients(self.model, opt.grad_clip_norm, opt.grad_clip_value)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.step += 1
        if self.schedules.step_decay:
            self.schedules.step_decay.apply(self.step)
        for callback in self.callbacks.values():
            callback.on_step_end(self)
        self._loss = loss.detach()

    def _after_step(self, bar: tqdm) -> None:
        """The log line, validation round, checkpoint or stop that this step is due for."""
        tr = self.config.trainer
        if self.step % tr.log_every == 0:
            self._log_training(bar)
        if self._round_due():
            validation_round(self)
            self.timer.restart()
        elif tr.checkpoint_every and self.step % tr.checkpoint_every == 0 and self.is_main:
            self._save_checkpoint()
        if self._interrupted:
            if self.is_main:
                self._save_checkpoint()
            raise TrainingInterrupted(self.step, self.checkpoint_path)

    def _rounds_start(self) -> int:
        """0, or the end of the warm-up when not ``evaluation.during_warmup`` (ProxyNCA++'s
        train.py validates after each main epoch only)."""
        return 0 if self.config.evaluation.during_warmup else self.config.schedule.warmup_steps

    def _round_due(self) -> bool:
        """A validation round after this step: every ``evaluation.every`` steps from
        :meth:`_rounds_start`, and after the last step."""
        start, every = self._rounds_start(), self.config.evaluation.every
        if self.step >= self.config.schedule.max_steps:
            return True
        return self.step > start and (self.step - start) % every == 0

    # ------------------------------------------------------------------ pieces of a step
    def _loader(self) -> DataLoader[Any]:
        return training_loader(self.train_dataset, self.sampler, self.runtime)

    def _freeze_backbone(self, frozen: bool) -> None:
        """Warm-up: the backbone gets no gradient (data-parallel runs drop it after the backward:
        DDP needs a fixed set of trainable parameters); a frozen backbone stays frozen."""
        model = self.model
        if self.dist is None and isinstance(model, Freezable) and not model.backbone_frozen:
            for param in model.backbone.parameters():
                param.requires_grad_(not frozen)

    def _raise_if_not_finite(self) -> None:
        self._fault.check(self.checkpoint_path)

    def _save_checkpoint(self) -> None:
        save_checkpoint(self)

    @property
    def last_loss(self) -> float:
        """The loss of the last step (reading it waits for the device)."""
        return float(self._loss)

    def _log_training(self, bar: tqdm) -> None:
        """The loss of the interval's last step and the learning rate (``metrics.jsonl``), and the
        step time and data wait (``timing.jsonl``)."""
        self._raise_if_not_finite()
        value = self.last_loss
        bar.set_postfix(loss=f"{value:.4f}", best=f"{self.selection.best_metric:.4f}")
        lr = self.optimizer.param_groups[0]["lr"]
        self._log({"step": self.step, "split": "train", "loss": value, "lr": lr})
        self.timing = {"step": self.step, **self.timer.read()}
        if self.is_main:
            self.timing_log.write(self.timing)

    def _log(self, record: dict[str, Any]) -> None:
        if self.is_main:
            self.log.write(record)

    def _say(self, line: str) -> None:
        if self.is_main:
            say(f"gspdml: {line}")

    def _request_stop(self) -> None:
        self._interrupted = True

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()


def train(
    config: RunConfig | Mapping[str, Any],
    run_dir: Optional[Path | str] = None,
    resume: bool = False,
    allow_changes: bool = False,
    allow_data_change: bool = False,
) -> dict[str, Any]:
    """Train the run a resolved config describes; returns ``results.json``'s content. A run that
    fails before its first checkpoint has its run directory removed when this call created it."""
    config = validated(config)
    run_dir = Path(run_dir) if run_dir is not None else Path(config.output_dir) / config.name
    created = not run_dir.exists()
    try:
        return Trainer.from_config(
            config,
            run_dir,
            resume=resume,
            allow_changes=allow_changes,
            allow_data_change=allow_data_change,
        ).fit()
    except BaseException:
        if created and not (run_dir / CHECKPOINT_FILE).exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
