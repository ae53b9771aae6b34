"""1,000,000 x 128 exact leave-one-out on one device: gspdml's search and metrics (MAP@R, P@1,
R@1/2/4/8) beside faiss's brute-force GPU index (``GpuIndexFlatIP``) where faiss has GPU support.

The data (made on the device, seeded): 100,000 classes of 10 unit vectors each around random
unit centres (noise 0.14 per coordinate, then normalised), so each query has R = 9 relevant
neighbours. gspdml's time is the whole :func:`gspdml.evaluation.metrics.retrieval_metrics` call
(the certified exact search at the depth the metrics need, then the metrics); faiss's is the
search of the k + 1 nearest by inner product (k = 9), whose order among near-tied neighbours
is its own. ``--rows N`` searches N of the rows against all of them (a smaller check).

    PYTHONPATH=src python benchmarks/million_knn.py [--device cuda] [--rows 1000000] [--dim 128]
"""

from __future__ import annotations

import argparse
import time

import torch

from gspdml.evaluation.metrics import retrieval_metrics

PER_CLASS = 10


def make_data(rows: int, dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(0)
    labels = torch.arange(rows, device=device) // PER_CLASS
    centres = torch.randn(rows // PER_CLASS + 1, dim, device=device, generator=generator)
    centres = torch.nn.functional.normalize(centres, dim=1)
    noise = 0.14 * torch.randn(rows, dim, device=device, generator=generator)
    return torch.nn.functional.normalize(centres[labels] + noise, dim=1), labels


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_gspdml(x: torch.Tensor, labels: torch.Tensor, queries: int) -> tuple[float, dict]:
    _synchronise(x.device)
    start = time.perf_counter()
    if queries >= len(x):
        result = retrieval_metrics(x, labels, metrics=["map_at_r", "precision_at_1", "recall_at"])
    else:  # the first ``queries`` rows against all (they find themselves: a gallery search)
        result = retrieval_metrics(
            x[:queries], labels[:queries], x, labels, metrics=["precision_at_1", "recall_at"]
        )
    _synchronise(x.device)
    return time.perf_counter() - start, result


def time_faiss(x: torch.Tensor, queries: int) -> str:
    try:
        import faiss
    except ImportError as error:
        return f"faiss not installed ({error})"
    if x.device.type != "cuda" or not hasattr(faiss, "StandardGpuResources"):
        return "faiss has no GPU support here (the CPU wheel; no faiss GPU wheel can be installed offline)"
    if faiss.get_num_gpus() < 1:
        return "faiss sees no GPU"
    host = x.cpu().numpy()
    resources = faiss.StandardGpuResources()
    index = faiss.GpuIndexFlatIP(resources, host.shape[1])
    start = time.perf_counter()
    index.add(host)
    index.search(host[:queries], PER_CLASS)
    return f"{time.perf_counter() - start:.1f} s (add + search of {PER_CLASS} neighbours)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=None, help="default: every row")
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    x, labels = make_data(args.rows, args.dim, device)
    queries = args.queries or args.rows
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{args.rows:,} x {args.dim} on {device} ({name}), {queries:,} queries")
    seconds, result = time_gspdml(x, labels, queries)
    peak = (
        torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    )
    metrics = ", ".join(
        f"{key} {value:.4f}" for key, value in result.items() if isinstance(value, float)
    )
    print(f"gspdml exact: {seconds:.1f} s, peak device memory {peak:.1f} GiB; {metrics}")
    print(f"faiss GPU brute force: {time_faiss(x, queries)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
