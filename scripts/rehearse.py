"""Rehearse a row of a reproduce table at the real size, on synthetic data: the path a user with
the real dataset and a GPU takes, timed phase by phase.

    python scripts/rehearse.py TABLE --rows ROW [--steps N] [--root DIR] [--device D] [--pretrained]
                               [--scale F] [--set KEY=VALUE ...]
    python scripts/rehearse.py gsp-table1 --rows cub/C2+GSP --steps 200

1. Writes the dataset's official layout at its published size into the row's dataset folder
   under ``--root`` (kept and reused when complete), from one generator
   (``scripts/rehearsal_data.py``): CUB-200-2011 (11,788 JPEGs of 200 classes in
   ``images/<class>/`` with ``images.txt``, ``image_class_labels.txt``, ``classes.txt``,
   ``train_test_split.txt``), Cars196 (16,185 in ``car_ims/`` listed by ``cars_annos.mat``),
   Stanford Online Products (120,053 listed by ``Ebay_train.txt``/``Ebay_test.txt``) and In-Shop
   (52,712 in ``Img/img/`` listed by ``Eval/list_eval_partition.txt``). Sizes approximate each
   dataset's photos (not their exact histograms). The content is learnable: each class has its
   own palette and arrangement of shapes, moved, scaled and recoloured a little per image, on a
   textured background.
2. Trains the row's first model (the preset as ``gspdml reproduce`` plans it, fold 0 and the
   first seed) for ``--steps`` steps with one validation round at the end, or on the preset's
   own schedule without ``--steps``; random backbone weights unless ``--pretrained`` (the
   speed is the pre-trained network's; the weights need not be there).
3. Prints the time of each phase (data wait, forward/backward/update, the baseline and
   validation rounds, the test evaluation), img/s, peak host and device memory, and the
   ``--dry-run`` GPU-hour estimate of the row beside the one the measured rates give.

``--scale`` (a fraction of the published size) and ``--set`` (config overrides, as ``gspdml
train --set``) make a smoke run of the same path; ``tests/scripts/test_rehearse.py`` runs one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rehearsal_data import layout, total_images, write_layout  # noqa: E402


def peak_host_mib() -> float:
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


class Phases:
    """Wall time of the trainer's phases (synchronised on CUDA), by wrapping the step-0 baseline
    of ``trainer.baselines`` and the validation round and final results the trainer module
    calls; :meth:`restore` puts them back."""

    def __init__(self, trainer, device):
        from gspdml.training import trainer as trainer_module

        self.seconds: dict[str, float] = {}
        self.device = device
        self.module = trainer_module
        self.original = {
            n: getattr(trainer_module, n) for n in ("validation_round", "final_results")
        }
        baselines = trainer.baselines
        baselines.evaluate = self._timed("baseline", baselines.evaluate)
        trainer_module.validation_round = self._timed(
            "validation", self.original["validation_round"]
        )
        trainer_module.final_results = self._timed("test + save", self.original["final_results"])

    def restore(self):
        for name, function in self.original.items():
            setattr(self.module, name, function)

    def _timed(self, phase, method):
        def run(*args, **kwargs):
            self._sync()
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._sync()
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

        return run

    def _sync(self):
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="a table of gspdml reproduce --list")
    parser.add_argument("--rows", required=True, help="the row (as gspdml reproduce --rows)")
    parser.add_argument("--steps", type=int, default=None, help="default: the preset's schedule")
    parser.add_argument("--root", type=Path, default=Path("runs/rehearsal/data"))
    parser.add_argument("--out", type=Path, default=Path("runs/rehearsal/runs"))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--pretrained", action="store_true", help="keep the preset's weights")
    parser.add_argument("--scale", type=float, default=1.0, help="of the published size")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides")
    args = parser.parse_args(argv)

    import torch

    from gspdml.models.inference import resolve_device
    from gspdml.training import Trainer
    from gspdml.workflows.reproduce.run import get_table, plan_table

    device = resolve_device(args.device)
    table = get_table(args.table)
    overrides = [f"trainer.device={device}", "trainer.progress=false"]
    if not args.pretrained:
        overrides.append("model.backbone.pretrained=false")
    overrides += args.set
    if args.steps:
        overrides += [
            f"schedule.max_steps={args.steps}",
            f"evaluation.every={args.steps}",
            "evaluation.patience=null",
        ]
    (plan,) = plan_table(
        table,
        rows=[args.rows],
        data_root=str(args.root),
        overrides=overrides,
        output_dir=str(args.out),
    )
    if plan.config is None:
        raise SystemExit(f"row {args.rows} has no preset: {plan.row.missing}")
    chosen = layout(plan.config.data.dataset_name)
    start = time.perf_counter()
    write_layout(chosen, Path(str(plan.config.data.dataset_root)), args.workers, args.scale)
    generated = time.perf_counter() - start
    run_dir = args.out / f"{plan.row.preset}-{int(time.time())}"
    start = time.perf_counter()
    trainer = Trainer.from_config(plan.config, run_dir)
    built = time.perf_counter() - start
    phases = Phases(trainer, device)
    start = time.perf_counter()
    try:
        results = trainer.fit()
    finally:
        phases.restore()
    total = time.perf_counter() - start
    steps, batch = results["steps"], plan.batch
    timing = trainer.timing_log.read()
    waited = sum(
        r["data_wait_seconds"] * (r["step"] - p)
        for r, p in zip(timing, [0] + [t["step"] for t in timing])
    )
    training = total - sum(phases.seconds.values())
    rows = {
        f"dataset written ({total_images(chosen, args.scale):,} images, or reused)": generated,
        "data read + model built": built,
        "training: data wait": waited,
        "training: forward/backward/update": training - waited,
        **phases.seconds,
    }
    print(
        f"\nrehearsal of {args.table} / {args.rows} ({plan.row.preset}) on {device}, {steps} steps of {batch} images"
    )
    print("| phase | seconds |\n|---|---|")
    for phase, seconds in rows.items():
        print(f"| {phase} | {seconds:.1f} |")
    peak_device = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    print(
        f"\ntraining {steps * batch / training:.1f} img/s ({training / steps:.3f} s/step, data wait "
        f"{waited / training:.0%}); peak host memory {peak_host_mib():.0f} MiB, peak device memory "
        f"{peak_device:.2f} GiB"
    )
    # the row as gspdml reproduce plans it (its own schedule), for the estimate
    (full,) = plan_table(table, rows=[args.rows], data_root=str(args.root))
    every = int(full.config.evaluation.every)
    rounds = max(1, full.steps // every)
    done_rounds = max(1, steps // int(plan.config.evaluation.every))
    per_round = phases.seconds.get("validation", 0.0) / done_rounds
    measured = full.models * (full.steps * training / steps + rounds * per_round) / 3600
    print(
        f"estimate (gspdml reproduce --dry-run): {full.gpu_hours:.2f} GPU-hours for {full.models} "
        f"models x {full.steps} steps x {batch} images"
    )
    print(
        f"measured rates on {device}: {measured:.2f} hours for the same ({training / steps:.3f} s "
        f"per step, {per_round:.1f} s per validation round, {rounds} rounds per model)"
    )
    print(json.dumps({"test": results.get("test", {}).get("map_at_r")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
