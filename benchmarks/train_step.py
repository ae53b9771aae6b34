"""gspdml's training step beside a plain PyTorch loop on the same model, batch, loss, precision
and memory format (images/s).

Rows: ResNet-50 (the conventional protocol's presets, 28 classes x 4 = 112 images) and
BN-Inception (the fair protocol's, 8 x 4 = 32), each with GAP and GSP, at 227 px, built from the
presets (random weights: the speed is the pre-trained network's). Both sides train copies of the
same embedder and loss on the same class-balanced batches (drawn once by gspdml's sampler) from
the same in-memory images:

* **gspdml**: :class:`gspdml.training.Trainer`'s step, fed by its own loader: the preset's
  optimiser groups and gradient clipping, the non-finite record kept on the device, the
  callbacks, the forward hook, ``trainer.compile`` with ``--compile``;
* **plain**: :func:`plain_steps` below, the loop a PyTorch user writes (forward in autocast, loss
  in float32, backward, ``Adam.step``), on a ``DataLoader`` over the same batches.

The last column names what gspdml's step does that the plain one does not (what a gap buys).
Both sides run without a host synchronisation inside the step; each round of ``--steps`` steps
ends with one. Rounds alternate between the sides (``--rounds``), after ``--warmup`` steps each.
``--device cuda --precisions fp32 bf16`` gives the GPU table; on a 2-core CPU the full batch at
227 px takes minutes per step, so ``--batch``/``--size`` reduce it (and the table says so).

    PYTHONPATH=src python benchmarks/train_step.py [--device cpu] [--batch 8] [--size 96] [--steps 2]
    PYTHONPATH=src python benchmarks/train_step.py --device cuda --precisions fp32 bf16 --compile
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import torch

from gspdml.config import load_config
from gspdml.data import DataSplits
from gspdml.data.base import EvalSplit
from gspdml.data.seeded import SeededTransformDataset
from gspdml.losses import build_loss
from gspdml.models import build_embedder
from gspdml.training import RunParts, Trainer
from gspdml.training.preflight import finish_lazy_initialisation, lazy_modules

#: row: (backbone, pooling) -> the preset whose model, loss, optimiser and batch it times
PRESETS = {
    ("resnet50", "gap"): "cub-conventional-r50-128-c1xbm-gap",
    ("resnet50", "gsp"): "cub-conventional-r50-128-c1xbm-gsp",
    ("bn_inception", "gap"): "cub-fair-c2-gap",
    ("bn_inception", "gsp"): "cub-fair-c2-gsp-nozsp",
}


class Images(torch.utils.data.Dataset):
    """``classes x per_class`` random images ``[3, size, size]`` (float32), label = class."""

    def __init__(self, classes: int, per_class: int, size: int):
        self.images = torch.randn(classes * per_class, 3, size, size)
        self.labels = torch.arange(classes).repeat_interleave(per_class).numpy()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.images[index], int(self.labels[index])


def plain_steps(model, loss_fn, loader, optimizer, device, precision, layout) -> int:
    """The plain loop: what a PyTorch user writes for one pass over ``loader``; images."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    model.train()
    loss_fn.train()
    seen = 0
    for images, labels in loader:
        seen += len(labels)
        images = images.to(device, non_blocking=True).contiguous(memory_format=layout)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            output = model(images)
        loss = loss_fn(output.embedding.float(), labels, output)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    return seen


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_config(preset: str, args, precision: str, device: torch.device):
    overrides = [
        "model.backbone.pretrained=false",
        f"trainer.precision={precision}",
        f"trainer.device={device}",
        f"trainer.compile={'true' if args.compile else 'false'}",
        "trainer.progress=false",
        "trainer.tensorboard=false",
        f"trainer.log_every={10**9}",
        "data.num_workers=0",
    ]
    if args.batch:
        overrides += [
            f"data.classes_per_batch={max(2, args.batch // 4)}",
            "data.samples_per_class=4",
        ]
    return load_config(preset, overrides)


def time_row(backbone: str, pooling: str, args, precision: str, device: torch.device) -> dict:
    config = build_config(PRESETS[backbone, pooling], args, precision, device)
    data = config.data
    images = Images(data.classes_per_batch + 2, 2 * data.samples_per_class, args.size)
    splits = DataSplits(
        SeededTransformDataset(images, seed=0), EvalSplit(images), EvalSplit(images)
    )
    torch.manual_seed(0)
    model = build_embedder(config.model, 3)
    loss = build_loss(
        config.loss, "loss", embedding_dim=model.embedding_dim, num_classes=len(images.labels)
    )
    plain_model, plain_loss = copy.deepcopy(model), copy.deepcopy(loss)  # before any hook
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(RunParts(model, loss, splits), config, Path(folder) / "run")
        loader = trainer._loader()

        def gspdml_pass(steps: int = args.steps) -> int:
            """``steps`` steps as the trainer's loop takes them, across epoch ends; images."""
            done = images_seen = 0
            while done < steps:
                trainer.sampler.advance_to(trainer.step)
                for x, y in loader:
                    trainer._train_step(x, y)
                    done, images_seen = done + 1, images_seen + len(y)
                    if done == steps:
                        break
            return images_seen

        # warm-up, and the GSP prototypes picked from the first batches (a run does it by the
        # first evaluation); the plain side then starts from the same weights and state
        while any(m.samples_seen < m.samples_needed for _, m in lazy_modules(trainer.model)):
            gspdml_pass(1)
        gspdml_pass()
        finish_lazy_initialisation(trainer.model, trainer.step)
        layout = trainer.layout
        plain_model.to(device, memory_format=layout).load_state_dict(trainer.model.state_dict())
        plain_loss.to(device).load_state_dict(trainer.loss.state_dict())
        optimizer = torch.optim.Adam(
            [*plain_model.parameters(), *plain_loss.parameters()],
            lr=config.optimizer.lr,
            weight_decay=config.optimizer.weight_decay,
        )
        forward = torch.compile(plain_model) if args.compile else plain_model
        batches = [[index for index, _ in batch] for batch in _take(trainer.sampler, args.steps)]
        plain_loader = torch.utils.data.DataLoader(
            images, batch_sampler=batches, pin_memory=device.type == "cuda"
        )

        def plain_pass() -> int:
            return plain_steps(
                forward, plain_loss, plain_loader, optimizer, device, trainer.precision, layout
            )

        seconds = {"gspdml": 0.0, "plain": 0.0}
        seen = {"gspdml": 0, "plain": 0}
        for round_ in range(args.rounds + 1):
            for side, run in (("gspdml", gspdml_pass), ("plain", plain_pass)):
                _synchronise(device)
                start = time.perf_counter()
                count = run()
                _synchronise(device)
                if round_:  # round 0 warms the plain side up (cuDNN tuning, compilation)
                    seconds[side] += time.perf_counter() - start
                    seen[side] += count
        trainer._raise_if_not_finite()
    batch = data.classes_per_batch * data.samples_per_class
    expected = args.rounds * args.steps * batch
    if seen != {"gspdml": expected, "plain": expected}:
        raise RuntimeError(f"images trained {seen}, expected {expected} per side")
    rate = {side: seen[side] / s for side, s in seconds.items()}
    return {
        "backbone": backbone,
        "pooling": pooling,
        "batch": batch,
        "precision": trainer.precision,
        "layout": "channels_last" if layout == torch.channels_last else "NCHW",
        **rate,
        "images": seen,
        "adds": adds(config),
    }


def _take(sampler, count: int) -> list:
    """The sampler's next ``count`` batches, across epoch ends."""
    out: list = []
    while len(out) < count:
        for batch in sampler:
            out.append(batch)
            if len(out) == count:
                break
    return out


def adds(config) -> str:
    """What gspdml's step does beyond the plain loop, from the config."""
    parts = ["non-finite record (3 scalar kernels)", "embedding hook"]
    opt = config.optimizer
    if opt.grad_clip_norm or opt.grad_clip_value:
        parts.append(f"grad clip (norm {opt.grad_clip_norm}, value {opt.grad_clip_value})")
    if opt.name != "adam" or opt.lr_multipliers:
        parts.append(f"{opt.name} with per-part lr groups")
    return "; ".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precisions", nargs="+", default=["auto"])
    parser.add_argument("--backbones", nargs="+", default=["resnet50", "bn_inception"])
    parser.add_argument("--poolings", nargs="+", default=["gap", "gsp"])
    parser.add_argument("--size", type=int, default=227)
    parser.add_argument("--batch", type=int, default=None, help="reduced batch (classes x 4)")
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="trainer.compile / torch.compile")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    reduced = args.batch is not None or args.size != 227
    print(
        f"device {device}{' (' + torch.cuda.get_device_name(device) + ')' if device.type == 'cuda' else ''}, "
        f"{args.size} px, {args.rounds} rounds x {args.steps} steps after one warm-up round, "
        f"compile {'on' if args.compile else 'off'}"
        + (" -- REDUCED batch/size (not the presets')" if reduced else "")
    )
    print(
        "| backbone | pooling | batch | precision | layout | gspdml img/s | plain img/s | gspdml/plain | gspdml's step adds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for precision in args.precisions:
        for backbone in args.backbones:
            for pooling in args.poolings:
                row = time_row(backbone, pooling, args, precision, device)
                print(
                    f"| {backbone} | {pooling} | {row['batch']} | {row['precision']} | {row['layout']} "
                    f"| {row['gspdml']:.1f} | {row['plain']:.1f} | {row['gspdml'] / row['plain']:.1%} "
                    f"| {row['adds']} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
