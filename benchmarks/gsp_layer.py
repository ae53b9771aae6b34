"""GSP layer cost: closed-form backward (seed 000 Prop. 4.2) vs autograd through the iterations.

Reproduces the computational analysis of seed 000 supplement §1.5 (Fig. 7; thesis Fig. 5.9,
spec gurbuz-thesis-spec.md §8 E4) on random tensors: forward+backward wall time and the memory
held for backward of

* GAP,
* GSP with the closed-form backward (only ``(rho, pi)`` saved),
* GSP with autograd through the unrolled fixed-point iterations,

for B = 32, n in {49, 64}, d = 128, m in {64, 128}, iters in {10, 25, 50, 100, 200}; then the
overhead of GSP in a full training step of the demo model (small_cnn + 1x1 head to 128,
32x32 inputs, batch 64, C2 loss, Adam).

Memory is the peak CUDA allocation on a GPU, and on CPU the bytes of the distinct tensors
autograd keeps for backward (counted with saved-tensor hooks; inputs and parameters included).

    PYTHONPATH=src python benchmarks/gsp_layer.py [--device cpu] [--threads 1] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gspdml.losses import build_loss
from gspdml.models.embedder import build_embedder
from gspdml.pooling import GSP

ITERS = (10, 25, 50, 100, 200)


def saved_tensor_bytes(fn) -> int:
    """Bytes of the distinct storages autograd saves while running ``fn`` (its result is kept alive)."""
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(storages.values())


def measure(step, device: torch.device, repeats: int, forward=None) -> tuple[float, float]:
    """(median milliseconds of ``step()``, memory in MiB of ``forward()`` (on CPU) or of
    ``step()`` (peak CUDA allocation); memory is NaN when neither applies)."""
    step()  # warm-up
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - start))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        memory = torch.cuda.max_memory_allocated() - base
    else:
        memory = saved_tensor_bytes(forward) if forward is not None else float("nan")
    return statistics.median(times), memory / 2**20


class LayerStep:
    """Forward + backward of one pooling layer on random local features."""

    def __init__(self, pooling, local: torch.Tensor):
        self.pooling, self.local = pooling, local
        self.target = torch.randn(local.shape[0], local.shape[1], device=local.device)

    def forward(self):
        out = self.pooling(self.local)
        return (out.vector * self.target).sum() + (0.0 if out.attributes is None else out.attributes.pow(2).sum())

    def __call__(self):
        self.local.grad = None
        self.forward().backward()


def layer_table(device: torch.device, repeats: int) -> list[str]:
    from gspdml.pooling.simple import GAP

    rows = [
        "| n | m | iters | GAP ms | closed ms | unrolled ms | time unrolled/closed | GAP MiB | closed MiB | unrolled MiB | memory unrolled/closed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    torch.manual_seed(0)
    for n in (49, 64):
        side = int(n**0.5)
        local = torch.randn(32, 128, side, n // side, device=device, requires_grad=True)
        gap = LayerStep(GAP(128), local)
        gap_ms, gap_mib = measure(gap, device, repeats, gap.forward)
        for m in (64, 128):
            for iters in ITERS:
                results = []
                for backward in ("closed_form", "unrolled"):
                    layer = GSP(128, num_prototypes=m, iters=iters, init="random", backward=backward).to(device)
                    step = LayerStep(layer, local)
                    results.append(measure(step, device, repeats, step.forward))
                (closed_ms, closed_mib), (unrolled_ms, unrolled_mib) = results
                rows.append(
                    f"| {n} | {m} | {iters} | {gap_ms:.2f} | {closed_ms:.2f} | {unrolled_ms:.2f} | "
                    f"{unrolled_ms / closed_ms:.1f}x | {gap_mib:.2f} | {closed_mib:.2f} | {unrolled_mib:.2f} | "
                    f"{unrolled_mib / closed_mib:.1f}x |"
                )
                print(rows[-1], flush=True)
    return rows


def training_step_table(device: torch.device, repeats: int) -> list[str]:
    """One Adam step of the demo model with GAP vs GSP (closed form) pooling."""
    rows = ["| pooling | step ms | overhead vs GAP |", "|---|---|---|"]
    torch.manual_seed(0)
    images = torch.randn(64, 3, 32, 32, device=device)
    labels = torch.arange(16, device=device).repeat_interleave(4)
    loss = build_loss({"name": "c2"})
    poolings = {
        "gap": {"name": "gap"},
        "gsp m=64 iters=100": {"name": "gsp", "num_prototypes": 64, "init": "random"},
        "gsp m=16 iters=100": {"name": "gsp", "num_prototypes": 16, "init": "random"},
    }
    reference = None
    for name, pooling in poolings.items():
        model = build_embedder({"backbone": {"name": "small_cnn"}, "embedding_dim": 128, "pooling": pooling}, 3).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad(set_to_none=True)
            out = model(images)
            loss(out.embedding, labels, out).backward()
            optimizer.step()

        ms, _ = measure(step, device, repeats)
        reference = reference or ms
        rows.append(f"| {name} | {ms:.1f} | {100 * (ms / reference - 1):+.1f}% |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (1 gives stable timings on a shared machine)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--skip-layer", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"device={device} threads={torch.get_num_threads()} repeats={args.repeats} (B=32, d=128)\n")
    if not args.skip_layer:
        layer_table(device, args.repeats)
        print()
    training_step_table(device, args.repeats)


if __name__ == "__main__":
    main()
