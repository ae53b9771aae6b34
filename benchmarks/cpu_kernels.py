"""Elementwise CPU kernels behind choices in the GSP code (``gspdml.pooling``), timed.

Each row times one torch expression on float32 CPU tensors, against the alternative the code
avoids (the comments at ``gsp.transport.LOG2_E`` / ``PLAIN_SUM_FLOOR`` and the docstrings of
``gsp.fused._positive`` / ``_squared_column_norms`` name the row):

* ``exp`` vs ``exp2`` of 65,536 floats (exp is computed as ``exp2(x log2 e)``);
* ``[x > 0]`` by comparison, by ``where``, and by arithmetic ``sign(relu(x))``;
* the transport loop's ``sum_j sigmoid(a_j)`` directly vs as ``logsumexp(logsigmoid(a))``;
* ``||f_j||^2`` of ``[B, d, n] = [64, 128, 64]`` features through ``vector_norm`` vs
  ``square().sum()``, with ``d`` contiguous (channels_last) and not.

Time is the best of ``--repeats`` rounds of ``--number`` calls, in microseconds per call; the
numbers depend on the CPU's vector units and on torch's kernels, so they belong to the machine
that printed them (see docs/benchmarks.md).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/cpu_kernels.py [--repeats 7] [--number 200]
"""

from __future__ import annotations

import argparse
import timeit

import torch


def cases() -> list[tuple[str, str, object]]:
    x = torch.randn(65536)
    a = torch.randn(64, 64) * 4
    features = torch.randn(64, 128, 64)
    channels_last = (
        features.transpose(1, 2).contiguous().transpose(1, 2)
    )  # same values, d contiguous
    return [
        ("exp of 65k floats", "torch.exp", lambda: torch.exp(x)),
        ("exp of 65k floats", "torch.exp2", lambda: torch.exp2(x)),
        ("[x > 0] of 65k floats", "(x > 0).to(x.dtype)", lambda: (x > 0).to(x.dtype)),
        ("[x > 0] of 65k floats", "torch.where", lambda: torch.where(x > 0, 1.0, 0.0)),
        ("[x > 0] of 65k floats", "x.relu().sign_()", lambda: x.relu().sign_()),
        ("sum_j sigmoid(a_j), [64, 64]", "sigmoid().sum()", lambda: torch.sigmoid(a).sum(dim=1)),
        (
            "sum_j sigmoid(a_j), [64, 64]",
            "logsumexp(logsigmoid)",
            lambda: torch.nn.functional.logsigmoid(a).logsumexp(dim=1),
        ),
        (
            "||f_j||^2, d contiguous",
            "vector_norm",
            lambda: torch.linalg.vector_norm(channels_last, dim=1).square_(),
        ),
        ("||f_j||^2, d contiguous", "square().sum()", lambda: channels_last.square().sum(dim=1)),
        (
            "||f_j||^2, n contiguous",
            "vector_norm",
            lambda: torch.linalg.vector_norm(features, dim=1).square_(),
        ),
        ("||f_j||^2, n contiguous", "square().sum()", lambda: features.square().sum(dim=1)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=200)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print("| what | expression | µs per call |\n|---|---|---:|")
    for what, expression, call in cases():
        best = min(timeit.repeat(call, repeat=args.repeats, number=args.number)) / args.number
        print(f"| {what} | `{expression}` | {best * 1e6:.1f} |")


if __name__ == "__main__":
    main()
