"""GSP cost: closed-form backward (GSP paper Prop. 4.2) vs autograd through the iterations.

Reproduces the computational analysis of the GSP paper supplement §1.5 (Fig. 7; thesis Fig. 5.9)
on random tensors, B = 32, d = 128, n in {49, 64},
m in {64, 128}, iters in {10, 25, 50, 100, 200}:

1. the pooling layer (costs + transport + weighting), forward + backward: GAP, GSP with the
   closed-form backward, GSP with autograd through the unrolled (log-domain) iterations;
2. the transport solver alone (cost -> (rho, pi) -> a loss): closed form, the same loop
   unrolled, and Algorithm 3 of the GSP paper as printed (plain-domain K = exp(-eps c), a
   matrix-vector product with K in every iteration) unrolled;
3. one Adam step of the small-CNN model of the ``scratch-*`` presets (small_cnn + 1x1 head to 128, 32x32 inputs, batch 64, C2)
   with GAP and with GSP, on a fixed batch;
4. that model's whole training step as its presets run it (``scratch-gap`` vs
   ``scratch-gsp``, the demo's regime before it moved to a pre-trained backbone: batch sampling, collage decoding and augmentation, the bf16 model
   step, Adam), from the trainer's own loop, GSP past its k-center warm-up;
5. on the CPU, the C kernels of ``gspdml.pooling.gsp.native`` against the torch code they replace
   (the solver loop and the backward chain from the transport's gradients to the costs'), at the
   demo's size.

Time is the best of ``--repeats`` runs (robust on a shared machine). Memory is the peak CUDA
allocation above the start on a GPU; on CPU, the bytes of the distinct storages autograd keeps
for backward (saved-tensor hooks) that are not the inputs, parameters or upstream gradients,
which exist anyway: what the backward method itself adds.

    PYTHONPATH=src python benchmarks/gsp_layer.py [--device cpu] [--threads 1] [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from gspdml.config import load_config
from gspdml.losses import build_loss
from gspdml.models.embedder import build_embedder
from gspdml.models.inference import memory_format
from gspdml.pooling import GSP
from gspdml.pooling.gsp import fused, native, transport
from gspdml.pooling.gsp.fused import cost_parts
from gspdml.pooling.gsp.transport import partial_transport
from gspdml.pooling.simple import GAP
from gspdml.training import Trainer
from gspdml.training.callbacks import Callback
from gspdml.training.host_memory import keep_freed_host_memory

ITERS = (10, 25, 50, 100, 200)


def saved_tensor_bytes(forward: Callable[[], object], existing: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages autograd saves for backward while running ``forward``,
    not counting the storages of ``existing`` tensors (inputs and parameters, which are held
    whether or not a backward follows): the memory a backward method adds."""
    held = {t.untyped_storage().data_ptr() for t in existing}
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in held:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    del out
    return sum(storages.values())


def elapsed_ms(step: Callable[[], None], device) -> float:
    """Wall-clock milliseconds of one call (synchronising CUDA before and after)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - start)


def measure(
    forward: Callable[[], torch.Tensor],
    inputs: list[torch.Tensor],
    device,
    repeats: int,
    existing: list[torch.Tensor] = (),
) -> tuple[float, float]:
    """(best milliseconds of forward + backward, MiB kept for backward beyond ``inputs`` and
    ``existing`` (CPU) or peak CUDA allocation above the start (GPU))."""

    def step():
        for x in inputs:
            x.grad = None
        forward().backward()

    step()  # warm-up
    times = [elapsed_ms(step, device) for _ in range(repeats)]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        memory = torch.cuda.max_memory_allocated() - base
    else:
        memory = saved_tensor_bytes(forward, [*inputs, *existing])
    return min(times), memory / 2**20


def algorithm3_as_printed(cost: torch.Tensor, mu: float, eps: float, iters: int):
    """GSP paper Algorithm 3 literally: K = exp(-eps c), matrix-vector products with K per iteration."""
    n = cost.shape[-1]
    kernel = torch.exp(-eps * cost)
    ones = torch.ones(cost.shape[0], 1, kernel.shape[1], dtype=cost.dtype, device=cost.device)
    t = torch.ones(cost.shape[0], 1, 1, dtype=cost.dtype, device=cost.device)
    for _ in range(iters + 1):
        rho = (1.0 / n) / (1.0 + t * torch.bmm(ones, kernel))  # [B, 1, n]
        t = mu / torch.bmm(ones, torch.bmm(kernel, rho.transpose(1, 2)))  # [B, 1, 1]
    return rho[:, 0], t * kernel * rho


def layer_table(device, repeats: int) -> None:
    print(
        "| n | m | iters | GAP ms | GSP closed ms | GSP unrolled ms | time unrolled/closed | GSP closed MiB | GSP unrolled MiB | memory unrolled/closed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for n in (49, 64):
        side = int(n**0.5)
        local = torch.randn(32, 128, side, n // side, device=device, requires_grad=True)
        target = torch.randn(32, 128, device=device)

        def objective(pooling):
            def forward():
                out = pooling(local)
                extra = 0.0 if out.attributes is None else out.attributes.pow(2).sum()
                return (out.vector * target).sum() + extra

            return forward

        gap_ms, _ = measure(objective(GAP(128)), [local], device, repeats)
        for m in (64, 128):
            for iters in ITERS:
                res = {}
                for backward in ("closed_form", "unrolled"):
                    layer = GSP(
                        128, num_prototypes=m, iters=iters, init="random", backward=backward
                    ).to(device)
                    res[backward] = measure(
                        objective(layer),
                        [local],
                        device,
                        repeats,
                        list(layer.parameters()) + [target],
                    )
                (c_ms, c_mib), (u_ms, u_mib) = res["closed_form"], res["unrolled"]
                print(
                    f"| {n} | {m} | {iters} | {gap_ms:.2f} | {c_ms:.2f} | {u_ms:.2f} | {u_ms / c_ms:.1f}x "
                    f"| {c_mib:.2f} | {u_mib:.2f} | {u_mib / c_mib:.1f}x |",
                    flush=True,
                )


def solver_table(device, repeats: int) -> None:
    print(
        "| n | m | iters | closed ms | unrolled ms | Alg. 3 printed ms | closed MiB | unrolled MiB | Alg. 3 printed MiB "
        "| unrolled/closed time, memory | Alg. 3/closed time, memory |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for n in (49, 64):
        for m in (64, 128):
            cost = (2 * torch.rand(32, m, n, device=device)).requires_grad_()
            g_rho, g_pi = torch.randn(32, n, device=device), torch.randn(32, m, n, device=device)
            for iters in ITERS:
                solvers = {
                    "closed": lambda: partial_transport(cost, 0.3, 5.0, iters),
                    "unrolled": lambda: partial_transport(
                        cost, 0.3, 5.0, iters, backward="unrolled"
                    ),
                    "printed": lambda: algorithm3_as_printed(cost, 0.3, 5.0, iters),
                }
                res = {}
                for name, solve in solvers.items():

                    def forward(solve=solve):
                        rho, pi = solve()
                        return (rho * g_rho).sum() + (pi * g_pi).sum()

                    res[name] = measure(forward, [cost], device, repeats, [g_rho, g_pi])
                (c_ms, c_mib), (u_ms, u_mib), (p_ms, p_mib) = (
                    res["closed"],
                    res["unrolled"],
                    res["printed"],
                )
                print(
                    f"| {n} | {m} | {iters} | {c_ms:.2f} | {u_ms:.2f} | {p_ms:.2f} | {c_mib:.2f} | {u_mib:.2f} | {p_mib:.2f} "
                    f"| {u_ms / c_ms:.1f}x, {u_mib / c_mib:.1f}x | {p_ms / c_ms:.1f}x, {p_mib / c_mib:.1f}x |",
                    flush=True,
                )


def training_step_table(device, repeats: int) -> None:
    """One Adam step of the demo model with GAP vs GSP (closed form) pooling, in fp32 and in the
    demo's own precision (bf16 autocast + channels_last on CPU, as ``trainer.precision: bf16``);
    the models take turns within every repeat so that a change of load on a shared machine hits
    all of them. The overhead is against GAP wired as GSP is (1x1 head, then pooling: the cost of
    the pooling layer itself); GAP's default wiring (pool, then a linear layer) is one row, and
    is cheaper because it projects one vector per image instead of every location."""
    print("| precision | pooling | step ms | overhead vs GAP (1x1 head first) |")
    print("|---|---|---|---|")
    torch.manual_seed(0)
    images = torch.randn(64, 3, 32, 32, device=device)
    labels = torch.arange(16, device=device).repeat_interleave(4)
    loss = build_loss({"name": "c2", "pos_margin": 0.0, "neg_margin": 0.5})
    models = {  # name: (pooling, head placement)
        "gap": ({"name": "gap"}, "local"),
        "gap, pool then project (default)": ({"name": "gap"}, None),
        "gsp m=16 iters=100 (scratch-gsp)": (
            {"name": "gsp", "num_prototypes": 16, "mu": 0.25, "eps": 10.0, "init": "random"},
            None,
        ),
        "gsp m=64 iters=100": ({"name": "gsp", "num_prototypes": 64, "init": "random"}, None),
    }
    for precision in ("fp32", "bf16"):
        steps = {
            name: _adam_step(pooling, head, images, labels, loss, precision, device)
            for name, (pooling, head) in models.items()
        }
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(repeats):
            for name, step in steps.items():
                times[name].append(elapsed_ms(step, device))
        reference = min(times["gap"])
        for name, values in times.items():
            print(
                f"| {precision} | {name} | {min(values):.1f} | {100 * (min(values) / reference - 1):+.1f}% |",
                flush=True,
            )


def _adam_step(
    pooling: dict, head, images, labels, loss, precision: str, device
) -> Callable[[], None]:
    """A warmed-up closure running one training step of the small-CNN model with ``pooling``
    (``head``: the projection's placement, None for the pooling's own)."""
    model = build_embedder(
        {"backbone": {"name": "small_cnn"}, "embedding_dim": 128, "head": head, "pooling": pooling},
        3,
    ).to(device)
    bf16 = precision == "bf16"
    layout = memory_format(precision, device)  # the trainer's layout for this precision
    model = model.to(memory_format=layout)
    images = images.contiguous(memory_format=layout)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(images)
        loss(out.embedding.float(), labels, out).backward()
        optimizer.step()

    step()
    return step


def native_table(repeats: int) -> None:
    """Solver (``solve_log``) and backward chain (``fused.cost_gradients``) at the demo's
    size (B = 64, m = 16, n = 8 x 8, mu = 0.25, eps = 10), C kernel vs torch code, best of ``repeats``."""
    if native.library() is None:
        print("native GSP kernels unavailable (no C compiler, or GSPDML_NATIVE=0)")
        return
    torch.manual_seed(0)
    features, prototypes = (
        torch.randn(64, 128, 64),
        torch.nn.init.xavier_uniform_(torch.empty(16, 128)),
    )
    cost, w_squared, f_squared = cost_parts(prototypes, features)
    log_rho, log_t = transport.solve_log(cost, 0.25, 10.0, 100, stop_when_stationary=True)
    grad_rho = torch.randn(64, 64) * 1e-3
    parts = {
        "solver (100 iterations at most)": lambda: transport.solve_log(
            cost, 0.25, 10.0, 100, stop_when_stationary=True
        ),
        "backward chain": lambda: fused.cost_gradients(
            cost, log_rho, log_t, grad_rho, None, w_squared, f_squared, 10.0
        ),
    }
    library = native.library
    print("| demo size, one call | C kernel ms | torch code ms | torch / C |")
    print("|---|---|---|---|")
    for name, part in parts.items():
        times = []
        for use_kernel in (True, False):
            native.library = library if use_kernel else (lambda: None)
            try:
                times.append(min(elapsed_ms(part, torch.device("cpu")) for _ in range(repeats)))
            finally:
                native.library = library
        print(
            f"| {name} | {times[0]:.3f} | {times[1]:.3f} | {times[1] / times[0]:.1f}x |", flush=True
        )


class StepClock(Callback):
    """Seconds between consecutive ends of training steps (data loading included)."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_step_end(self, trainer) -> None:
        self.ends.append(time.perf_counter())

    def chunk_means(self, skip: int, size: int) -> list[float]:
        """Mean step time of each run of ``size`` steps after the first ``skip``."""
        steps = [b - a for a, b in zip(self.ends[skip:], self.ends[skip + 1 :])]
        return [
            statistics.fmean(steps[i : i + size]) for i in range(0, len(steps) - size + 1, size)
        ]


def demo_trainer_table(repeats: int, warmup: int = 30, timed: int = 40, chunk: int = 10) -> None:
    """Per-step time of the demo's own training loop (``Trainer.fit`` on the ``scratch-*`` presets), GAP vs
    GSP; each repeat trains both for ``warmup + timed`` steps, alternating, and the table shows the
    best mean over runs of ``chunk`` consecutive steps (the k-center warm-up is 16 steps)."""
    means: dict[str, list[float]] = {"gap": [], "gsp": []}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(max(1, repeats // 5)):
            for name in means:
                overrides = [
                    f"schedule.max_steps={warmup + timed}",
                    "evaluation.every=100000",
                    "trainer.progress=false",
                ]
                clock = StepClock()
                config = load_config(f"scratch-{name}", overrides)
                trainer = Trainer.from_config(
                    config, Path(folder) / f"{name}-{repeat}", callbacks={"clock": clock}
                )
                trainer.fit()
                means[name].extend(clock.chunk_means(warmup, chunk))
    gap, gsp = min(means["gap"]) * 1e3, min(means["gsp"]) * 1e3
    print("| small-CNN training loop (scratch-* presets, bf16) | step ms | overhead vs GAP |")
    print("|---|---|---|")
    print(f"| gap | {gap:.1f} | +0.0% |")
    print(f"| gsp m=16 iters=100 | {gsp:.1f} | {100 * (gsp / gap - 1):+.1f}% |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads (1 gives stable timings on a shared machine)",
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--only", choices=("layer", "solver", "step", "loop", "native"), default=None
    )
    parser.add_argument(
        "--system-malloc",
        action="store_true",
        help="leave glibc's thresholds alone (the trainer keeps freed memory, trainer.keep_freed_memory)",
    )
    args = parser.parse_args()
    kept = not args.system_malloc and keep_freed_host_memory()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    print(
        f"device={device}{name} threads={torch.get_num_threads()} repeats={args.repeats} (best of); B=32, d=128, mu=0.3, eps=5\n"
    )
    print(
        "freed host memory kept in the process, as the trainer does"
        if kept
        else "system malloc thresholds"
    )
    for name, table in (
        ("layer", layer_table),
        ("solver", solver_table),
        ("step", training_step_table),
    ):
        if args.only in (None, name):
            table(device, args.repeats)
            print()
    if args.only in (None, "loop") and device.type == "cpu":
        demo_trainer_table(args.repeats)
        print()
    if args.only in (None, "native") and device.type == "cpu":
        native_table(args.repeats)


if __name__ == "__main__":
    main()
