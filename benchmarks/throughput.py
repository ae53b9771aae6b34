"""Training-step and data-pipeline throughput (images/s) on this machine.

Rows:
* a full training step (forward, C2 loss, backward, Adam step) of the embedder with batch 32
  (8 classes x 4; ``--batch``) for ResNet-50 at 227 px and the small CNN at 32 px (``--size``),
  with GAP and with GSP in the setting each is trained with (ResNet-50: m = 64, mu = 0.3, eps = 5
  as in the papers; the small CNN: the scratch-gsp preset's m = 16, mu = 0.25, eps = 10), in fp32
  and in a low precision (``--low``; default: what ``trainer.precision: auto`` picks on the device,
  bf16 on a CPU without bf16 units too): bf16 autocast or fp16 AMP with a gradient scaler
  (CUDA), in the layout the trainer uses for it (:func:`gspdml.models.inference.memory_format`);
* on the CPU, each convolution of a model alone (forward + backward at its input shape in the
  training step), fp32 in the trainer's layout (NCHW) vs bf16 channels_last: the ceiling bf16 puts
  on a whole step (small CNN only with ``--conv-layers``);
* the data pipeline alone: read + decode + MLRC training augmentation of JPEGs written on the
  fly (500x375, the typical CUB photo size), one process (``--images 0`` leaves it out).

Targets: GSP within 10% of GAP; bf16 >= 2.5x fp32 on a CPU with bf16 matrix instructions. Other processes share the
CPU, so compare ratios from one run, not absolute numbers across runs. On a crowded machine use
``--threads 1 --clock cpu``: images per CPU-second of one thread do not depend on how often the
process is descheduled (with several threads, descheduled OpenMP workers stall the others).

    PYTHONPATH=src python benchmarks/throughput.py [--steps 3] [--warmup 1] [--threads 2] [--clock wall|cpu] [--conv-layers]
    PYTHONPATH=src python benchmarks/throughput.py --device cuda --models resnet50 --batch 64 --size 224 --images 0
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from gspdml.compat.hardware import auto_precision
from gspdml.data.images import load_image
from gspdml.data.recipes import image_transform
from gspdml.losses import build_loss
from gspdml.models import build_embedder
from gspdml.models.inference import autocast_context, memory_format
from gspdml.training.host_memory import keep_freed_host_memory

MODELS = {  # name: (backbone spec, input size, the GSP settings the model is trained with)
    "resnet50": (
        {"name": "resnet50"},
        227,
        {"num_prototypes": 64, "mu": 0.3, "eps": 5.0},
    ),  # papers' CUB/Cars (GSP paper §4.4)
    "small_cnn": (
        {"name": "small_cnn"},
        32,
        {"num_prototypes": 16, "mu": 0.25, "eps": 10.0},
    ),  # the scratch-gsp preset
}
POOLS = ("gap", "gsp")


def pooling_spec(pool: str, model: str) -> dict:
    """GAP, or GSP with the model's settings (random prototypes: no k-center warm-up to time)."""
    return (
        {"name": "gap"} if pool == "gap" else {"name": "gsp", **MODELS[model][2], "init": "random"}
    )


def low_precision(device: torch.device) -> str:
    """The precision compared with fp32: what ``auto`` picks on ``device`` (bf16 where it is
    native, fp16 on CUDA GPUs without bf16), bf16 where auto would stay in fp32."""
    chosen = auto_precision(device).precision
    return "bf16" if chosen == "fp32" else chosen


def training_step_rate(
    backbone: dict,
    size: int,
    pooling: dict,
    precision: str,
    device: torch.device,
    steps: int,
    warmup: int,
    clock,
    batch: int = 32,
) -> float:
    """Images per second of a full training step (mean over ``steps`` after ``warmup``) on
    batches of ``batch`` images, 4 per class."""
    torch.manual_seed(0)
    model = (
        build_embedder(
            {"backbone": backbone, "embedding_dim": 128, "pooling": pooling}, in_channels=3
        )
        .to(device)
        .train()
    )
    layout = memory_format(precision, device)  # as the trainer lays out the model and batches
    model = model.to(memory_format=layout)
    classes = batch // 4
    loss_fn = build_loss(
        {"name": "c2", "pos_margin": 0.0, "neg_margin": 0.3841},
        "loss",
        embedding_dim=128,
        num_classes=classes,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    images = torch.randn(4 * classes, 3, size, size, device=device)
    images = images.contiguous(memory_format=layout)
    labels = torch.arange(classes, device=device).repeat_interleave(4)

    def step() -> None:
        with autocast_context(precision, device):
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

    for _ in range(warmup):
        step()
    _sync(device)
    start = clock()
    for _ in range(steps):
        step()
    _sync(device)
    return 4 * classes * steps / (clock() - start)


def conv_layer_rows(backbone: dict, size: int, steps: int, clock) -> list[tuple[str, float, float]]:
    """``(layer, fp32 NCHW ms, bf16 channels_last ms)`` of forward + backward of every
    convolution of ``backbone`` alone, at the input shape it sees in a batch of 32."""
    model = build_embedder(
        {"backbone": backbone, "embedding_dim": 128, "pooling": {"name": "gap"}}, in_channels=3
    )
    shapes: dict[str, torch.Size] = {}

    def record(name: str):
        def hook(module, args, output) -> None:
            shapes[name] = args[0].shape

        return hook

    hooks = [
        m.register_forward_hook(record(name))
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Conv2d)
    ]
    with torch.no_grad():
        model(torch.randn(32, 3, size, size))
    for hook in hooks:
        hook.remove()
    rows = []
    for name, shape in shapes.items():
        conv = model.get_submodule(name)
        times = []
        for bf16 in (False, True):
            layout = torch.channels_last if bf16 else torch.contiguous_format
            layer = conv.to(memory_format=layout)
            x = (
                torch.randn(shape).contiguous(memory_format=layout).requires_grad_(shape[1] != 3)
            )  # images need no gradient

            def step(layer=layer, x=x, bf16=bf16) -> None:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = layer(x)
                out.backward(torch.ones_like(out))

            step()
            start = clock()
            for _ in range(steps):
                step()
            times.append(1e3 * (clock() - start) / steps)
        rows.append((name, *times))
    return rows


def pipeline_rate(count: int, clock, seed: int = 0) -> float:
    """Images per second of read + decode + MLRC train transform (Resize 256, RandomResizedCrop
    227 with scale (0.16, 1), flip, ToTensor, ImageNet normalisation) with one torch thread, as
    in a DataLoader worker (with several intra-op threads the small tensor ops of ToTensor and
    Normalize spend most of their time in thread synchronisation)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _pipeline_rate(count, clock, seed)
    finally:
        torch.set_num_threads(threads)


def _pipeline_rate(count: int, clock, seed: int) -> float:
    rng = np.random.default_rng(seed)
    transform = image_transform("mlrc", train=True)
    generator = torch.Generator().manual_seed(seed)
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i in range(count):
            # smooth random content (JPEG of pure noise is unrealistically large)
            small = rng.integers(0, 256, size=(24, 32, 3), dtype=np.uint8)
            image = Image.fromarray(small).resize((500, 375), Image.BICUBIC)
            path = Path(folder) / f"{i}.jpg"
            image.save(path, quality=90)
            paths.append(path)
        transform(load_image(paths[0]), generator)  # warm-up
        start = clock()
        for path in paths:
            transform(load_image(path), generator)
        return count / (clock() - start)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per row")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before timing")
    parser.add_argument("--images", type=int, default=200, help="JPEGs for the data-pipeline row")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--batch", type=int, default=32, help="images per training step (4 per class)"
    )
    parser.add_argument(
        "--size", type=int, default=None, help="input size in pixels (default: the model's own)"
    )
    parser.add_argument(
        "--low",
        choices=("bf16", "fp16"),
        default=None,
        help="the precision compared with fp32 (default: what trainer.precision auto picks here)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or CPU time of this process",
    )
    parser.add_argument(
        "--conv-layers",
        action="store_true",
        help="also time each convolution alone, fp32 vs bf16 (CPU)",
    )
    parser.add_argument(
        "--system-malloc",
        action="store_true",
        help="leave glibc's thresholds alone (the trainer keeps freed memory, trainer.keep_freed_memory)",
    )
    args = parser.parse_args()
    kept = not args.system_malloc and keep_freed_host_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    if args.batch < 4 or args.batch % 4:
        parser.error(
            f"--batch must be a positive multiple of 4 (4 images per class), got {args.batch}"
        )
    low = args.low or low_precision(device)
    if low == "fp16" and device.type != "cuda":
        parser.error("--low fp16 needs a CUDA device")
    per = "CPU-second" if args.clock == "cpu" else "second"
    name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    print(
        f"device {device}{name}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"batch {args.batch} ({args.batch // 4} x 4), images per {per}"
    )
    print(
        "freed host memory kept in the process, as the trainer does"
        if kept
        else "system malloc thresholds"
    )
    print(
        f"{'model':<10} {'px':>4} {'pool':<5} {'fp32 img/s':>11} {low + ' img/s':>11} {low + '/fp32':>10}"
    )
    rates: dict[tuple[str, str, str], float] = {}
    for name in args.models:
        backbone, size, _ = MODELS[name]
        size = args.size or size
        for pool in POOLS:
            for precision in ("fp32", low):
                rates[name, pool, precision] = training_step_rate(
                    backbone,
                    size,
                    pooling_spec(pool, name),
                    precision,
                    device,
                    args.steps,
                    args.warmup,
                    clock,
                    args.batch,
                )
            fp32, fast = rates[name, pool, "fp32"], rates[name, pool, low]
            print(
                f"{name:<10} {size:>4} {pool:<5} {fp32:>11.1f} {fast:>11.1f} {fast / fp32:>9.2f}x",
                flush=True,
            )
        for precision in ("fp32", low):
            ratio = rates[name, "gsp", precision] / rates[name, "gap", precision]
            print(f"{name:<10} {'':>4} gsp/gap {precision}: {ratio:.2f}", flush=True)
        if args.conv_layers and device.type == "cpu":
            for layer, fp32_ms, bf16_ms in conv_layer_rows(backbone, size, args.steps, clock):
                print(
                    f"{name:<10} conv {layer}: fp32 NCHW {fp32_ms:.2f} ms, bf16 channels_last {bf16_ms:.2f} ms ({fp32_ms / bf16_ms:.2f}x)",
                    flush=True,
                )
    if args.images < 1:
        return
    rate = pipeline_rate(args.images, clock)
    print(
        f"data pipeline (read + decode + MLRC augmentation, 500x375 JPEG, 1 worker, 1 thread): {rate:.1f} img/s"
    )


if __name__ == "__main__":
    main()
