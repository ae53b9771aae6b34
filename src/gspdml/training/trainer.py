"""The training loop: class-balanced batches, optimiser groups, validation rounds with early
stopping and restore-best, reduce-on-plateau, atomic checkpoints and exact resume.

The run directory's layout is :mod:`gspdml.training.run_dir`. The last checkpoint (everything
needed to resume: weights, optimiser moments, sampler position, RNG states, counters, callback
state) is written at every validation round, every ``trainer.checkpoint_every`` steps and on Ctrl-C (at
the end of the current step). ``resume=True`` continues a stopped run from its last checkpoint
and ends with the same weights as an uninterrupted run with the same seed; a config that differs
from the saved one is refused (:mod:`gspdml.training.config_changes`).

Before step 1 the trainer checks, once, what would make the result silently worse or fail later
(:mod:`gspdml.training.preflight`): a validation split that cannot rank (refused when it selects
the model), batches that do not meet what the loss declares (positive pairs, class-disjoint
halves), output fields the loss reads and the model does not declare, a lazily initialised module
(GSP's k-center prototypes) that could not initialise by the first evaluation, a training split
that does not follow the dataset protocol, an unwritable run directory.
It prints the run directory, device, precision and split on stderr, and one line per evaluation.

Launched by ``torchrun`` (``WORLD_SIZE > 1``, ``trainer.distributed: auto``), the trainer runs
data-parallel and matches one process on the global batch (see :mod:`gspdml.training.distributed`);
only rank 0 writes the run directory.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import signal
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from gspdml.compat.hardware import resolve_precision
from gspdml.config import RunConfig, dump_config, parse_yaml, validated
from gspdml.data.eval_transform import run_eval_transform
from gspdml.data.samplers import ClassBalancedBatchSampler, RandomBatchSampler
from gspdml.data.summary import (
    describe_splits,
    image_size_note,
    ranking_problem,
    scorable_queries,
)
from gspdml.errors import ConfigError, DataError, GspdmlError, TrainingError
from gspdml.evaluation.selection import round_metrics, selection_key, selection_value
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings
from gspdml.models.inference import (
    autocast_context,
    embed,
    loader_options,
    memory_format,
    resolve_device,
    resolve_num_workers,
    split_embeddings,
)
from gspdml.output_files import (
    atomic_write_text,
    check_writable_folder,
    json_text,
    refuse_linked_folders,
    remove_stale_temporaries,
)
from gspdml.progress import say
from gspdml.training import distributed as ddp
from gspdml.training.baseline import BackboneGap, backbone_is_pretrained, comparison, worse_than
from gspdml.training.callbacks import Callback
from gspdml.training.checkpoint import CheckpointError, load_state, save_state
from gspdml.training.component_options import check_same_options, write_options
from gspdml.training.config_changes import check_resume_config
from gspdml.training.data_fingerprint import differences, fingerprint
from gspdml.training.host_memory import keep_freed_host_memory
from gspdml.training.metrics_log import MetricsLog, tensorboard_wanted
from gspdml.training.optim import PlateauSchedule, StepDecay, build_optimizer, clip_gradients
from gspdml.training.parts import RunParts, build_run, find_callbacks
from gspdml.training.preflight import (
    check_lazy_initialisation,
    check_loss_declarations,
    check_training_dataset,
    check_warmup,
    lazy_modules,
)
from gspdml.training.reload import check_reloadable
from gspdml.training.rng import rng_state, set_rng_state
from gspdml.training.run_dir import (
    BEST_WEIGHTS_FILE,
    CHECKPOINT_FILE,
    CONFIG_FILE,
    DATA_FILE,
    DATA_RECORD_FIX,
    METRICS_FILE,
    RESULTS_FILE,
    TENSORBOARD_DIR,
    TIMING_FILE,
    WEIGHTS_FILE,
    read_data_record,
    save_weights,
)
from gspdml.training.run_identity import check_no_other_run, identity
from gspdml.training.run_lock import FolderLock, check_unlocked
from gspdml.training.run_record import environment_record, write_environment
from gspdml.training.step_timing import StepTimer
from gspdml.training.tensorboard_extras import TensorBoardExtras
from gspdml.training.trackers import open_trackers


class Trainer:
    """Trains the parts of one run (:class:`~gspdml.training.parts.RunParts`: an embedder, a
    loss, the data) as a resolved config's ``data`` (batches), ``optimizer``, ``schedule``,
    ``evaluation`` and ``trainer`` sections say; :func:`train` builds the parts from the config.

    Public attributes used by callbacks: ``config``, ``model``, ``loss``, ``optimizer``,
    ``train_dataset``, ``device``, ``step``, :meth:`embed` and :meth:`evaluate`.
    """

    def __init__(
        self,
        parts: RunParts,
        config: RunConfig | Mapping[str, Any],
        run_dir: Path | str,
        *,
        resume: bool = False,
        allow_changes: bool = False,
        allow_data_change: bool = False,
    ):
        config = validated(config)  # one built with dataclasses.replace is checked here
        self.config, self.run_dir = config, Path(run_dir)
        self.checkpoint_path = self.run_dir / CHECKPOINT_FILE
        self.best_path = self.run_dir / BEST_WEIGHTS_FILE
        changed = run_dir_changes(self.run_dir, config, resume, allow_changes)
        self._setup_device()
        # one writer per run directory (rank 0 writes it), until the end of fit
        self._lock = FolderLock(self.run_dir, "gspdml train") if self.is_main else None
        try:
            self._construct(parts, resume, changed, allow_data_change)
        except BaseException:
            self._release_lock()
            raise

    def _construct(
        self, parts: RunParts, resume: bool, changed: dict, allow_data_change: bool
    ) -> None:
        """The construction steps after the run directory is locked."""
        if self.is_main:  # the files a killed writer of this folder was writing
            subfolders = {self.checkpoint_path.parent, self.best_path.parent}
            refuse_linked_folders(self.run_dir, [TENSORBOARD_DIR, *(f.name for f in subfolders)])
            for folder in {self.run_dir, *subfolders}:
                remove_stale_temporaries(folder)
        self._take_parts(parts)
        self.data_record = fingerprint(self.data)
        if resume and self.is_main and not allow_data_change:
            self._check_same_data()
        self._check_parts()
        self.sampler = self._build_sampler()
        self.forward_model: torch.nn.Module = self._wrap_distributed() if self.dist else self.model
        self._finite_embeddings = torch.ones((), dtype=torch.bool, device=self.device)
        self._fault = FaultRecord(self.device)
        self.model.register_forward_hook(self._watch_embeddings)
        self.training_model = self._compiled(self.forward_model)
        self._setup_optimisation()
        self.callbacks = find_callbacks(self.model, self.loss, parts.callbacks)
        self.step = 0
        self._loss = torch.full((), float("nan"), device=self.device)  # read at log intervals
        self.timer = StepTimer()
        self.timing: dict[str, float] = {}  # of the last log interval
        self.best_metric, self.best_step, self.bad_rounds = float("-inf"), 0, 0
        self.stopped_early = self.finished = False
        self.baseline: dict[str, dict[str, float]] = {}  # evaluated before step 1, checkpointed
        self.log = MetricsLog(self.run_dir / METRICS_FILE)
        self.timing_log = MetricsLog(self.run_dir / TIMING_FILE)
        self._interrupted = False
        if resume:
            self._restore(load_state(self.checkpoint_path)[0])
        data, ev = self.config.data, self.config.evaluation
        first = min(self._rounds_start() + ev.every, self.config.schedule.max_steps) - self.step
        batch = self.classes_per_batch * data.samples_per_class
        check_lazy_initialisation(self.model, first, batch)
        if self.is_main:
            self._open_run_dir(resume, changed)

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
        """The trainer of the parts ``config`` describes, with the user's ``callbacks`` (by name):
        the config and the run directory are checked first, then the parts are built
        (:func:`~gspdml.training.parts.build_run`, pre-training included)."""
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

    # ------------------------------------------------------------------ construction steps
    def _setup_device(self) -> None:
        """Processes, device and precision (``trainer`` section)."""
        tr = self.config.trainer
        self.tensorboard = tensorboard_wanted(tr.tensorboard)
        device = resolve_device(tr.device)
        self.dist, self.device = ddp.setup_distributed(tr.distributed, device)
        self.is_main = self.dist is None or self.dist.is_main
        if self.device.type == "cpu" and tr.keep_freed_memory:
            keep_freed_host_memory()  # no fresh pages to fault in at every step (glibc)
        self.precision_choice = resolve_precision(tr.precision, self.device)
        self.precision = self.precision_choice.precision
        self.layout = memory_format(self.precision, self.device)
        if self.device.type == "cuda":  # training batches have one shape: tune the kernels once
            torch.backends.cudnn.benchmark = True
        self.num_workers = resolve_num_workers(self.config.data.num_workers, self.device)

    def _take_parts(self, parts: RunParts) -> None:
        """The model and the loss on the device; the training and evaluation splits."""
        self.data, self.notes = parts.data, list(parts.notes)
        self.train_dataset = parts.data.train
        split = self.config.evaluation.split
        self.eval_split = parts.data.val if split == "val" else parts.data.test
        if self.eval_split is None:
            raise ConfigError("evaluation.split", f"the data has no {split} split")
        # config.yaml records the evaluation transform: search and bundles need no training data
        spec = run_eval_transform(self.config.data.eval_transform, parts.data)
        self.config = replace(self.config, data=replace(self.config.data, eval_transform=spec))
        self.model = parts.model.to(self.device, memory_format=self.layout)
        self.loss = parts.loss.to(self.device)

    def _check_parts(self) -> None:
        """Everything the parts declare, against the config, once before step 1."""
        self._check_splits_score()
        self.selects = self._check_selection_split()
        check_reloadable(self.model, self.config)
        check_loss_declarations(self.loss, self.model, self.config.data)
        check_warmup(self.model, self.config.schedule.warmup_steps)
        check_training_dataset(self.train_dataset)

    def _build_sampler(self):
        """Batches of ``(index, epoch)`` items: augmentation is a function of (seed, epoch,
        index)."""
        data, seed = self.config.data, self.config.seed
        rank, world = (self.dist.rank, self.dist.world_size) if self.dist else (0, 1)
        labels = self.train_dataset.labels
        self.classes_per_batch = data.batch_classes(len(torch.as_tensor(labels).unique()))
        if data.sampler == "random":  # classes_per_batch x samples_per_class random items
            return RandomBatchSampler(
                labels,
                self.classes_per_batch * data.samples_per_class,
                seed=seed,
                rank=rank,
                world_size=world,
                with_epoch=True,
            )
        names = getattr(self.train_dataset, "class_names", None)  # optional (dataset protocol)
        return ClassBalancedBatchSampler(
            labels,
            self.classes_per_batch,
            data.samples_per_class,
            halves=data.halves,
            replacement=data.replacement,
            seed=seed,
            rank=rank,
            world_size=world,
            class_names=names,
            with_epoch=True,
        )

    def _setup_optimisation(self) -> None:
        """Optimiser groups, learning-rate schedules and the fp16 gradient scaler."""
        cfg = self.config
        self.optimizer = build_optimizer(cfg.optimizer, self.model, self.loss)
        plateau, decay = cfg.schedule.plateau, cfg.schedule.step_decay
        lr = cfg.optimizer.lr
        self.plateau = PlateauSchedule(self.optimizer, lr, **plateau) if plateau else None
        self.step_decay = StepDecay(self.optimizer, **decay) if decay else None
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None

    def _open_run_dir(self, resume: bool, changed: dict) -> None:
        """The resolved config, the metrics log from the current step on, and the header."""
        if not resume or changed:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.run_dir / CONFIG_FILE, dump_config(self.config))
        atomic_write_text(self.run_dir / DATA_FILE, json_text(self.data_record, indent=1))
        write_environment(self.run_dir, environment_record(self.device, self.precision), resume)
        write_options(self.run_dir, self.config)
        self.log.truncate_after(self.step if resume else -1)
        self.timing_log.truncate_after(self.step if resume else -1)
        if self.tensorboard:
            self.log.open_tensorboard(self.step if resume else -1)
        self.log.sinks = open_trackers(self.config, self.run_dir)
        if self.tensorboard:
            self.log.sinks.append(TensorBoardExtras(self))
        self._print_header(resume, changed)

    # ------------------------------------------------------------------ checks and messages
    def _check_same_data(self) -> None:
        """``--resume`` on the data the run started on (``data.json``; a run written before the
        record existed is not checked)."""
        saved = read_data_record(self.run_dir)
        if saved is None:
            return
        try:
            changes = differences(saved, self.data_record)
        except (AttributeError, KeyError, TypeError, ValueError) as err:  # a field of another type
            raise DataError(
                f"{self.run_dir / DATA_FILE}: not a data record gspdml wrote ({err}); "
                f"{DATA_RECORD_FIX}"
            ) from None
        if changes:
            raise ConfigError(
                "--resume",
                f"the data changed since {self.run_dir} started: {'; '.join(changes)}. Resume on "
                "the data it trained on, start a new run, or pass --allow-data-change to continue "
                "on this data",
            )

    def _check_splits_score(self) -> None:
        """The evaluation split and the test split each have a query to score (a relevant
        reference), else their metrics are undefined: refused before step 1, not NaN after
        training."""
        split = self.config.evaluation.split
        for name, part in {split: self.eval_split, "test": self.data.test}.items():
            if part is not None and scorable_queries(part) == 0:
                raise ConfigError(
                    "evaluation.split" if name == split else "data.dataset",
                    f"the {name} split has no query to score: no query has another image of its "
                    f"class ({len(part.query)} queries, every class one image), so its retrieval "
                    "metrics are undefined. Give its classes at least two images each",
                )

    def _check_selection_split(self) -> bool:
        """Whether validation rounds can select a model. A split that cannot rank (one class, or
        no class with a second image) makes every round score the same: refused when the config
        selects by it (restore_best, patience, plateau), else training runs without selection."""
        ev = self.config.evaluation
        problem = ranking_problem(self.eval_split)
        if problem is None:
            return True
        if ev.restore_best or ev.patience or self.config.schedule.plateau:
            raise ConfigError(
                "evaluation.split",
                f"the {ev.split} split cannot select a model: {problem}. Give it more "
                "classes (data.dataset.val_fraction, data.dataset.val_classes, or a val/ folder), or train "
                "without model selection: evaluation.restore_best: false, evaluation.patience: null "
                "(and no schedule.plateau)",
            )
        return False

    def _print_header(self, resume: bool, changed: dict) -> None:
        """Where the run goes, on what, and on which data (stderr; stdout carries the results)."""
        tr = self.config.trainer
        lines = [
            f"{'resuming' if resume else 'run'} {self.run_dir.resolve()} at step {self.step} on {self.device}, "
            f"precision {self.precision} ({self.precision_choice.reason})",
            f"tensorboard {'on: ' + str(self.run_dir / TENSORBOARD_DIR) if self.tensorboard else 'off'}, "
            f"checkpoint {'every ' + str(tr.checkpoint_every) + ' steps and ' if tr.checkpoint_every else ''}"
            f"at every evaluation",
        ]
        lines += [
            f"changed on resume: {key}: {old!r} -> {new!r}" for key, (old, new) in changed.items()
        ]
        lines += [*self.notes, *describe_splits(self.data)]
        auto = (
            " (data.classes_per_batch: auto)"
            if self.config.data.classes_per_batch == "auto"
            else ""
        )
        lines.append(
            f"batches of {self.classes_per_batch} classes x {self.config.data.samples_per_class} "
            f"images{auto}"
        )
        size = image_size_note(self.train_dataset, self.config.data.dataset)
        lines += [size] if size else []
        if not self.selects:
            lines.append(
                f"the {self.config.evaluation.split} split cannot rank ({ranking_problem(self.eval_split)}): "
                "training without model selection; the final weights are those of the last step"
            )
        for line in lines:
            print(f"gspdml: {line}", file=sys.stderr)

    def _say(self, line: str) -> None:
        if self.is_main:
            say(f"gspdml: {line}")

    def _wrap_distributed(self) -> DistributedDataParallel:
        """DDP around the embedder (SyncBatchNorm on GPU)."""
        if self.device.type == "cuda":
            self.model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(self.model)
        # every parameter keeps requires_grad (the backbone warm-up drops gradients instead), so
        # DDP's reducer sees a fixed set; unused parameters (optional pooling parts) are allowed.
        return DistributedDataParallel(
            self.model,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=True,
        )

    def _compiled(self, model: torch.nn.Module) -> torch.nn.Module:
        """``trainer.compile``: the model the training step runs, compiled by ``torch.compile``
        (the same parameters; evaluation and checkpoints use the eager model)."""
        if not self.config.trainer.compile:
            return model
        backend = "inductor" if self.config.trainer.compile is True else self.config.trainer.compile
        return torch.compile(model, backend=backend)

    def _watch_embeddings(self, module, inputs, output) -> None:
        """Forward hook: remember (without a device sync) whether a training embedding was non-finite."""
        if module.training:
            self._finite_embeddings &= torch.isfinite(output.embedding).all()

    # ------------------------------------------------------------------ public helpers
    def embed(self, dataset) -> tuple[torch.Tensor, torch.Tensor]:
        """Embeddings and labels of ``dataset`` with the current model (eval mode); data-parallel
        runs split the work over the ranks and every rank gets the whole result."""
        return self._embed_fn()(self.model, dataset, **self._embed_kwargs())

    def evaluate(self, split) -> dict[str, float]:
        """Retrieval metrics on ``split`` (computed by rank 0 and shared with every rank)."""
        return self._score(split, EvalSpec(recall_at=self.config.evaluation.recall_at))

    def evaluate_round(
        self,
        split,
        model: Optional[torch.nn.Module] = None,
        metrics: Optional[tuple[str, ...]] = None,
    ) -> dict[str, float]:
        """The metrics of a validation round (and of the final test evaluation) on ``split``: the
        report of the run's ``evaluation`` section (:class:`~gspdml.evaluation.service.EvalSpec`,
        the one evaluation service, as ``gspdml evaluate`` and the protocols score); the training
        split is embedded only for steps that learn on it (PCA-whitening). ``model``: another
        model to score the same way (a baseline), instead of the trained one; ``metrics``: the
        per-query metrics (None: all, as the test split; a validation round passes
        :func:`~gspdml.evaluation.selection.round_metrics`)."""
        model = self.model if model is None else model
        spec = EvalSpec.from_evaluation(self.config.evaluation, metrics=metrics)
        train = (
            self._embed_fn()(model, self.train_dataset, **self._embed_kwargs())[0]
            if spec.needs_training_embeddings
            else None
        )
        return self._score(split, spec, train, model)

    def _score(self, split, spec: EvalSpec, train=None, model=None) -> dict[str, float]:
        """The metrics of ``spec`` on ``split`` (of ``model``, by default the trained one),
        computed by rank 0 and shared with every rank."""
        model = self.model if model is None else model
        on_device = not spec.postprocess  # re-ranking's sparse algebra is scipy's, on the host
        embeddings = split_embeddings(
            model, split, self._embed_fn(), **self._embed_kwargs(), on_device=on_device
        )
        metrics = (
            evaluate_embeddings(*embeddings, spec=spec, train=train).metrics
            if self.is_main
            else None
        )
        return self.dist.broadcast_object(metrics) if self.dist else metrics

    def _embed_fn(self):
        if self.dist is None:
            return embed
        ddp.broadcast_buffers(self.model)  # rank 0's batch-norm statistics everywhere
        return functools.partial(ddp.embed_sharded, self.dist)

    def _embed_kwargs(self) -> dict[str, Any]:
        data = self.config.data
        return {
            "batch_size": data.eval_batch_size,
            "device": self.device,
            "precision": self.precision,
            "num_workers": self.num_workers,
        }

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, Any]:
        """Train until ``schedule.max_steps`` or early stopping; then restore the best weights,
        save them and evaluate the test split. Returns the content of ``results.json``."""
        cfg = self.config
        max_steps = cfg.schedule.max_steps
        for callback in self.callbacks.values():
            callback.on_train_start(self)
        checkpoint_every = cfg.trainer.checkpoint_every
        if getattr(self.model, "feature_cache", None) is not None:  # its first pass prints progress
            self.model.feature_cache.progress = cfg.trainer.progress and self.is_main
        bar = tqdm(
            total=max_steps,
            initial=self.step,
            disable=not (cfg.trainer.progress and self.is_main) or sys.stderr is None,
            desc=cfg.name,
            dynamic_ncols=True,
            file=sys.stderr,
        )
        if self.step == 0:
            self._evaluate_baseline()
        try:
            with self._interruptible():
                loader = self._loader()
                self.timer.restart()
                while not self.finished:
                    self.sampler.advance_to(self.step)
                    for images, labels in self.timer.batches(loader):  # the rest of the epoch
                        self._train_step(images, labels)
                        bar.update(1)
                        if self.step % cfg.trainer.log_every == 0:
                            self._log_training(bar)
                        if self._round_due():
                            self._validation_round()
                            self.timer.restart()
                        elif (
                            checkpoint_every and self.step % checkpoint_every == 0 and self.is_main
                        ):
                            self._save_checkpoint()
                        if self._interrupted:
                            self._stop_interrupted()
                        if self.finished:
                            break
            bar.close()
            results = self._finish()
            if self.dist:  # leave together: rank 0 hosts the rendezvous store, and a rank still
                self.dist.barrier()  # tearing down when it exits is aborted
            return results
        finally:
            self.log.close()
            self.timing_log.close()
            self._release_lock()
            if self.dist:
                self.dist.close()

    def _rounds_start(self) -> int:
        """The step validation rounds count from: 0, or the end of the warm-up when
        ``evaluation.during_warmup`` is false (ProxyNCA++'s train.py validates after each main
        epoch only: no selection, bad-round count or plateau in the warm-up)."""
        sched = self.config.schedule
        return 0 if self.config.evaluation.during_warmup else sched.warmup_steps

    def _round_due(self) -> bool:
        """A validation round after this step: every ``evaluation.every`` steps from
        :meth:`_rounds_start`, and after the last step."""
        start, every = self._rounds_start(), self.config.evaluation.every
        if self.step >= self.config.schedule.max_steps:
            return True
        return self.step > start and (self.step - start) % every == 0

    def _start_main_phase(self) -> None:
        """``schedule.fresh_optimizer_after_warmup``: before the first step after the warm-up the
        optimiser forgets its moments and step counts, as ProxyNCA++'s train.py, which warms up
        with one Adam (``opt_warmup``) and trains with a new one (``opt``); the groups keep their
        learning rates. A run resumed at this step resets here too."""
        sched = self.config.schedule
        if sched.fresh_optimizer_after_warmup and self.step == sched.warmup_steps > 0:
            self.optimizer.state.clear()

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()

    @contextlib.contextmanager
    def _interruptible(self):
        """Ctrl-C (SIGINT) ends the current step, writes a checkpoint and stops with
        :class:`TrainingInterrupted`; a second Ctrl-C stops at once. Only the main thread of a
        single process can take signals; elsewhere Ctrl-C stops as usual (the last checkpoint stays)."""

        def request_stop(signum, frame):
            self._interrupted = True
            signal.signal(signal.SIGINT, previous)  # a second Ctrl-C interrupts at once

        try:
            previous = signal.signal(signal.SIGINT, request_stop)
        except ValueError:  # not the main thread
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _stop_interrupted(self) -> None:
        if self.is_main:
            self._save_checkpoint()
        raise TrainingInterrupted(self.step, self.checkpoint_path)

    def _loader(self) -> DataLoader:
        """The training batches; each pass over it runs from the batch after the last consumed
        one (the sampler is advanced to the step count first: exact with workers that read
        ahead) to the end of its epoch. Workers (``data.num_workers``) persist across epochs
        and read ahead (:func:`~gspdml.models.inference.loader_options`)."""
        return DataLoader(
            self.train_dataset,
            batch_sampler=self.sampler,
            pin_memory=self.device.type == "cuda",
            **loader_options(self.num_workers),
        )

    @property
    def last_loss(self) -> float:
        """The loss of the last step (reading it waits for the device)."""
        return float(self._loss)

    def _log_training(self, bar) -> None:
        """The training record of a log interval: the loss of its last step (the one read of
        the device per interval) and the learning rate (``metrics.jsonl``); the interval's step
        time and data wait (:class:`~gspdml.training.step_timing.StepTimer`, ``timing.jsonl``)."""
        self._raise_if_not_finite()
        value = self.last_loss
        bar.set_postfix(loss=f"{value:.4f}", best=f"{self.best_metric:.4f}")
        record = {"step": self.step, "split": "train", "loss": value}
        record["lr"] = self.optimizer.param_groups[0]["lr"]
        self._log(record)
        self.timing = {"step": self.step, **self.timer.read()}
        if self.is_main:
            self.timing_log.write(self.timing)

    def _train_step(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """One optimiser step on ``images``/``labels``; it does not wait for the device, so it
        returns nothing: its loss is :attr:`last_loss` (which waits)."""
        cfg = self.config
        self.model.train()
        self.loss.train()
        self._start_main_phase()
        if cfg.schedule.warmup_steps:
            self._freeze_backbone(self.step < cfg.schedule.warmup_steps)
        images, labels = (
            images.to(self.device, non_blocking=True),
            labels.to(self.device, non_blocking=True),
        )
        images = images.contiguous(memory_format=self.layout)
        self._finite_embeddings.fill_(True)
        with autocast_context(self.precision, self.device):
            model, labels = (
                ddp.global_batch(self.training_model, images, labels, self.dist)
                if self.dist
                else (self.training_model, labels)
            )
            loss = self.loss.training_objective(model, images, labels)
        self._fault.note(self.step + 1, loss.detach(), self._finite_embeddings)
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.dist:
            ddp.average_gradients(self.loss)
            if self.step < cfg.schedule.warmup_steps:
                for param in self.model.backbone.parameters():
                    param.grad = None
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        for callback in self.callbacks.values():
            callback.on_after_backward(self)
        clip_gradients(self.model, cfg.optimizer.grad_clip_norm, cfg.optimizer.grad_clip_value)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.step += 1
        if self.step_decay:
            self.step_decay.apply(self.step)
        for callback in self.callbacks.values():
            callback.on_step_end(self)
        self._loss = loss.detach()

    def _raise_if_not_finite(self) -> None:
        """Stop when a step since the last check had a NaN/inf loss or embedding (embeddings are
        checked too because a loss may mask some rows out), naming the first such step. Steps
        record it on the device (:class:`FaultRecord`); this read, at each log interval and
        before every evaluation and checkpoint, is the only wait for the device, so no
        checkpoint or weights file ever holds the weights of a failed step."""
        fault = self._fault.read()
        if fault is not None:
            raise TrainingError(
                f"{fault}; training stopped, the last good checkpoint {self.checkpoint_path} is intact"
            )

    def _freeze_backbone(self, frozen: bool) -> None:
        """Warm-up: the backbone gets no gradient (data-parallel runs drop it after the backward,
        because DDP needs a fixed set of parameters that require gradients). A backbone in the
        frozen regime stays frozen after the warm-up: no gradient is computed through it."""
        if self.dist is None and not getattr(self.model.backbone, "is_frozen", False):
            for param in self.model.backbone.parameters():
                param.requires_grad_(not frozen)

    def _finish_lazy_initialisation(self) -> None:
        """Modules that initialise from data seen in training (GSP's k-center prototypes) finish
        now, from what they have seen, so no weights are evaluated, selected or saved before."""
        for name, module in lazy_modules(self.model):
            if not module.is_initialised:
                used = module.finish_initialisation()
                self._say(
                    f"{name or 'model'}: initialised at step {self.step} from {used} samples "
                    f"(before the first evaluation)"
                )

    def _validation_round(self) -> None:
        ev = self.config.evaluation
        self._raise_if_not_finite()
        self._finish_lazy_initialisation()
        metrics = self.evaluate_round(self.eval_split, metrics=round_metrics())
        value = selection_value(metrics, ev.metric, ev.select_postprocessed)
        if not self.selects:
            self.best_metric, self.best_step = (
                value,
                self.step,
            )  # no selection: the latest round stands
            self._log({"step": self.step, "split": ev.split, **metrics})
        elif value > self.best_metric:
            self.best_metric, self.best_step, self.bad_rounds = value, self.step, 0
            if self.is_main:
                save_weights(self.best_path, self.model, self.data.channels, self.config)
        else:
            self.bad_rounds += 1
        if self.selects:
            self._log({"step": self.step, "split": ev.split, **metrics, "best": self.best_metric})
        wait = (
            f"; data wait {self.timing['data_wait']:.0%} of {self.timing['seconds_per_step']:.3g} s/step"
            if self.timing
            else ""
        )
        self._say(
            f"step {self.step}/{self.config.schedule.max_steps}: loss {self.last_loss:.4f}, {ev.split} "
            f"{selection_key(ev.metric, ev.select_postprocessed)} {value:.4f}"
            + (f" (best {self.best_metric:.4f} at step {self.best_step})" if self.selects else "")
            + wait
        )
        if self.plateau:
            self.plateau.step(value, at_step=self.step)
        for callback in self.callbacks.values():
            callback.on_evaluation(self, metrics)
        patience = ev.patience
        self.stopped_early = bool(patience) and self.bad_rounds >= patience
        self.finished = self.stopped_early or self.step >= self.config.schedule.max_steps
        if self.is_main:
            self._save_checkpoint()
        if self.dist:
            self.dist.barrier()  # the checkpoint and best weights exist before any rank goes on

    def _log(self, record: dict[str, Any]) -> None:
        if self.is_main:
            self.log.write(record)

    def _evaluate_baseline(self) -> None:
        """The test-split metrics of the model as built (``step0``) and, for a pretrained
        backbone, of its own average-pooled features (``backbone_gap``), with the protocol of the
        final evaluation; taken before step 1 and kept in the checkpoint, so a resumed run reports
        the same numbers. The random state is put back, so training is the same with or without."""
        if not self.config.evaluation.baseline or self.data.test is None:
            return
        state = rng_state()
        if any(not module.is_initialised for _, module in lazy_modules(self.model)):
            self._say("baseline: step0 skipped (the model initialises from training data)")
        else:
            self.baseline["step0"] = self.evaluate_round(self.data.test)
        if backbone_is_pretrained(self.config.model.backbone):
            gap = BackboneGap(self.model.backbone)
            self.baseline["backbone_gap"] = self.evaluate_round(self.data.test, gap)
        set_rng_state(state)

    def _report_baseline(self, test: dict[str, float]) -> None:
        """The console line comparing the trained model with each baseline, and a warning for
        each baseline that scores higher."""
        if not self.baseline:
            return
        metric = selection_key(self.config.evaluation.metric)
        self._say(comparison(metric, test[metric], self.baseline))
        for line in worse_than(metric, test[metric], self.baseline):
            self._say(f"warning: {line}")

    def _finish(self) -> dict[str, Any]:
        cfg = self.config
        self._raise_if_not_finite()
        weights_step = self.step  # the step the saved (and tested) weights come from
        if cfg.evaluation.restore_best and self.selects and self.best_path.exists():
            state, _ = load_state(self.best_path, self.device)
            self.model.load_state_dict(state)
            weights_step = self.best_step
        if self.is_main:
            save_weights(self.run_dir / WEIGHTS_FILE, self.model, self.data.channels, cfg)
        results: dict[str, Any] = {
            "name": cfg.name,
            "steps": self.step,
            "best_step": self.best_step,
            "weights_step": weights_step,
            "best_"
            + selection_key(
                cfg.evaluation.metric, cfg.evaluation.select_postprocessed
            ): self.best_metric,
            "stopped_early": self.stopped_early,
            "lr_drop_steps": list(self.plateau.drops) if self.plateau else [],
        }
        if self.data.test is not None:
            results["test"] = self.evaluate_round(self.data.test)
            # which metrics the test report holds, and those computed only when named
            # (evaluation.metrics: the whole-ranking mAP and MRR, the metrics at a cutoff K)
            results["test_metrics"] = EvalSpec.from_evaluation(cfg.evaluation).metrics_computed()
            self._log(
                {
                    "step": self.step,
                    "split": "test",
                    "final": True,
                    "weights_step": weights_step,
                    **results["test"],
                }
            )
            if self.baseline:
                results["baseline"] = self.baseline
                self._report_baseline(results["test"])
        if self.is_main:
            results.update(identity(self.run_dir))
            atomic_write_text(self.run_dir / RESULTS_FILE, json_text(results, indent=2))
        return results

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self) -> None:
        self._raise_if_not_finite()
        state = {
            "model": self.model.state_dict(),
            "loss": self.loss.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "plateau": self.plateau.state_dict() if self.plateau else None,
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "trainer": {
                "step": self.step,
                "best_metric": self.best_metric,
                "best_step": self.best_step,
                "bad_rounds": self.bad_rounds,
                "stopped_early": self.stopped_early,
                "finished": self.finished,
                "baseline": self.baseline,
            },
            "rng": rng_state(),
            "callbacks": {name: c.callback_state() for name, c in self.callbacks.items()},
        }
        save_state(self.checkpoint_path, state, {"step": self.step})

    def _restore(self, state: dict[str, Any]) -> None:
        self._check_checkpoint_shapes(state)
        self.model.load_state_dict(state["model"])
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.plateau and state["plateau"]:
            self.plateau.load_state_dict(state["plateau"])
        if self.scaler and state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])
        self._restore_counters(state["trainer"])
        self._restore_callbacks(state["callbacks"])
        set_rng_state(state["rng"])

    def _check_checkpoint_shapes(self, state: dict[str, Any]) -> None:
        """The checkpoint's model and loss parameters have this run's shapes; a loss that holds
        one proxy (or classifier row) per training class differs after ``--allow-data-change``
        added or removed a class: a ConfigError naming the tensors, not torch's size mismatch."""
        changed = [
            f"{part}.{name}: {tuple(saved.shape)} in the checkpoint, {tuple(own[name].shape)} now"
            for part, module in (("model", self.model), ("loss", self.loss))
            for own in [dict(module.named_parameters())]  # buffers may size themselves (XBM)
            for name, saved in state[part].items()
            if name in own and own[name].shape != saved.shape
        ]
        if changed:
            classes = len(self.train_dataset.class_names or []) or "another number of"
            raise ConfigError(
                "--allow-data-change",
                f"{self.run_dir} cannot continue on this data: {'; '.join(changed)}. Its loss "
                "or model holds a tensor with one row per training class (a proxy loss's "
                f"proxies), and the data now has {classes} training classes. Resume on the "
                "classes it trained on, or start a new run (with model.init_from pointing at "
                "this run once it has finished, to start from its weights)",
            )

    def _restore_counters(self, counters: dict[str, Any]) -> None:
        """The trainer's own counters, and nothing else a checkpoint might hold."""
        unknown = sorted(set(counters) - set(COUNTERS))
        if unknown:
            raise CheckpointError(
                f"{self.checkpoint_path}: unknown trainer state {unknown}; "
                f"known: {', '.join(COUNTERS)}"
            )
        for key, kind in COUNTERS.items():
            setattr(self, key, kind(counters.get(key, {}) if key == "baseline" else counters[key]))

    def _restore_callbacks(self, saved: dict[str, Any]) -> None:
        """Each callback's state by its name (a callback without saved state starts afresh; the
        empty state of a stateless callback that is gone is dropped)."""
        saved = saved or {}  # an older gspdml's list without callbacks reads as none
        if not isinstance(saved, dict):
            raise CheckpointError(
                f"{self.checkpoint_path} keeps callback state by position (an "
                "older gspdml); resume it with that version"
            )
        unknown = sorted(
            name for name, kept in saved.items() if kept and name not in self.callbacks
        )
        if unknown:
            raise CheckpointError(
                f"{self.checkpoint_path} holds the state of callbacks {unknown}, "
                f"which this run does not have (it has: "
                f"{', '.join(self.callbacks) or 'none'})"
            )
        for name, callback in self.callbacks.items():
            if name in saved:
                callback.load_callback_state(saved[name])


#: the trainer's counters a checkpoint restores, with their types
COUNTERS = {
    "step": int,
    "best_metric": float,
    "best_step": int,
    "bad_rounds": int,
    "stopped_early": bool,
    "finished": bool,
    "baseline": dict,  # older checkpoints have none: their run reports no baseline
}


class FaultRecord:
    """The first training step with a non-finite loss or embedding, recorded on the device
    without waiting for it (:meth:`note` every step), read by the trainer at its checks."""

    def __init__(self, device: torch.device):
        self.step = torch.zeros((), dtype=torch.int64, device=device)  # 0: none yet
        self.embeddings = torch.zeros((), dtype=torch.bool, device=device)
        self.loss = torch.zeros((), device=device)

    def note(self, step: int, loss: torch.Tensor, finite_embeddings: torch.Tensor) -> None:
        first = (self.step == 0) & ~(torch.isfinite(loss) & finite_embeddings)
        self.step.masked_fill_(first, step)
        self.embeddings.copy_(torch.where(first, ~finite_embeddings, self.embeddings))
        self.loss.copy_(torch.where(first, loss.float(), self.loss))

    def read(self) -> Optional[str]:
        """What went wrong first, or None."""
        step = int(self.step)
        if step == 0:
            return None
        loss = float(self.loss)
        what = (
            f"non-finite embeddings (loss {loss})"
            if bool(self.embeddings)
            else f"non-finite loss ({loss})"
        )
        return f"{what} at step {step}"


class TrainingInterrupted(GspdmlError):
    """Ctrl-C: training stopped at a step boundary after writing its checkpoint."""

    def __init__(self, step: int, checkpoint: Path):
        self.step, self.checkpoint = step, checkpoint
        super().__init__(f"interrupted at step {step}; checkpoint written to {checkpoint}")


def _resolved(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` with this version's defaults filled in (so that a default written out by one
    side only does not read as a change on resume); as given if it does not load."""
    try:
        return validated(config)
    except GspdmlError:
        return config


def run_dir_changes(run_dir: Path, config: RunConfig, resume: bool, allow_changes: bool) -> dict:
    """Refuse a run directory that already holds a run (unless resuming), that holds nothing to
    resume, whose saved config differs (:mod:`gspdml.training.config_changes`) or that cannot be
    written; returns the allowed changes ``{key: (old, new)}``."""
    checkpoint = run_dir / CHECKPOINT_FILE
    if not resume and checkpoint.exists():
        raise ConfigError(
            "name", f"{run_dir} already holds a run; resume it (--resume) or choose another name"
        )
    if resume and not checkpoint.exists():
        raise ConfigError("name", f"nothing to resume: no checkpoint in {run_dir}")
    if not resume:
        check_no_other_run(run_dir)
    changed = {}
    if resume:
        saved_path = run_dir / CONFIG_FILE
        saved = parse_yaml(saved_path.read_text()) if saved_path.is_file() else {}
        changed = check_resume_config(_resolved(saved), _resolved(config), allow_changes)
        check_same_options(run_dir, config)
    check_writable_folder(run_dir)  # before any work: a read-only or impossible run directory
    return changed


def train(
    config: RunConfig | Mapping[str, Any],
    run_dir: Optional[Path | str] = None,
    resume: bool = False,
    allow_changes: bool = False,
    allow_data_change: bool = False,
) -> dict[str, Any]:
    """Train the run described by a resolved config (:meth:`Trainer.from_config`); returns the test
    results (``results.json``). ``allow_changes``: see :mod:`gspdml.training.config_changes`;
    ``allow_data_change``: resume although the data differs from what the run started on
    (:mod:`gspdml.training.data_fingerprint`).

    A run that fails before its first checkpoint leaves nothing to resume: the run directory is
    removed again when this call created it (Ctrl-C always writes a checkpoint first)."""
    config = validated(config)
    run_dir = Path(run_dir) if run_dir is not None else Path(config.output_dir) / config.name
    created = not run_dir.exists()
    try:
        trainer = Trainer.from_config(
            config,
            run_dir,
            resume=resume,
            allow_changes=allow_changes,
            allow_data_change=allow_data_change,
        )
        return trainer.fit()
    except BaseException:
        if created and not (run_dir / CHECKPOINT_FILE).exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
