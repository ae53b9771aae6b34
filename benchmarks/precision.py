"""bf16 against float32 on this CPU: why ``trainer.precision: auto`` picks bf16 only where it is native.

    PYTHONPATH=src python benchmarks/precision.py [--repeats 5]
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 PYTHONPATH=src python benchmarks/precision.py   # as an AVX2-only CPU

Times, best of ``--repeats`` after a warm-up, each in float32 and under bf16 autocast
(channels_last for the convolutions, as the trainer lays out a bf16 CPU model):

- a 1024² matmul;
- a 3×3 convolution, 64 → 64 channels on 64 × 16 × 16 maps, forward + backward;
- one training step of the demo's backbone (ResNet20 on 16 × 16 tiles, batch 128, Adam), the
  pre-training step of ``gspdml pretrain resnet20-digits``.

The table names the CPU class and what ``auto`` picks here (:mod:`gspdml.compat.hardware`).
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.compat import hardware
from gspdml.models.backbones import build_backbone
from gspdml.models.inference import memory_format


def best_ms(step, repeats: int) -> float:
    step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return 1000 * best


def matmul_case(bf16: bool):
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    if bf16:
        a, b = a.bfloat16(), b.bfloat16()
    return lambda: a @ b


def cpu_layout(bf16: bool) -> torch.memory_format:
    """The layout the trainer gives a CPU model in bf16 or fp32 (models.inference.memory_format)."""
    return memory_format("bf16" if bf16 else "fp32", torch.device("cpu"))


def conv_case(bf16: bool):
    layout = cpu_layout(bf16)
    conv = nn.Conv2d(64, 64, 3, padding=1).to(memory_format=layout)
    x = torch.randn(64, 64, 16, 16).contiguous(memory_format=layout).requires_grad_()

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = conv(x)
        y.float().sum().backward()

    return step


def resnet20_case(bf16: bool):
    layout = cpu_layout(bf16)
    backbone = build_backbone({"name": "resnet20"}, in_channels=1, field="benchmark")
    model = nn.Sequential(
        backbone, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(backbone.out_channels, 100)
    ).to(memory_format=layout)
    optimizer = torch.optim.Adam(model.parameters())
    x, y = (
        torch.randn(128, 1, 16, 16).contiguous(memory_format=layout),
        torch.randint(0, 100, (128,)),
    )

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


CASES = {
    "matmul 1024²": matmul_case,
    "conv 3×3 64ch fwd+bwd": conv_case,
    "ResNet20 pre-training step": resnet20_case,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    choice = hardware.auto_precision("cpu")
    print(
        f"CPU: {hardware.cpu_model()}; class: {hardware.cpu_class()}; torch kernels {hardware.aten_capability()}; "
        f"{torch.get_num_threads()} threads; auto picks {choice.precision} ({choice.reason})\n"
    )
    print("| case | fp32 ms | bf16 ms | bf16 / fp32 |")
    print("|---|---:|---:|---:|")
    for name, case in CASES.items():
        fp32, bf16 = (best_ms(case(low), args.repeats) for low in (False, True))
        print(f"| {name} | {fp32:.1f} | {bf16:.1f} | {bf16 / fp32:.2f} |", flush=True)


if __name__ == "__main__":
    main()
