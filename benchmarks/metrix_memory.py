"""Peak memory of Metrix feature mixup (one training objective, forward and backward), all mixed
maps at once vs ``mix_chunk``, at the SOP recipe's shapes: ResNet-50 layer-4 maps (2048 x 7 x 7),
GAP+GMP, a 2048 -> 512 embedding layer, contrastive loss, positive-negative mixing.

The backbone is left out (the maps are a leaf tensor), so the numbers are the cost of the mixing
itself. Each configuration runs in a fresh process; the peak is that process's maximum resident
set size (CPU) minus its size just before the objective::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/metrix_memory.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, time, torch
from torch import nn
from gspdml.losses import build_loss
from gspdml.losses.metrix_pairs import mixing_triples
from gspdml.models import Embedder
from gspdml.pooling import POOLINGS
classes, per_class, chunk = {classes}, {per_class}, {chunk}
torch.manual_seed(0)
model = Embedder(nn.Identity(), POOLINGS.build("gap_gmp", in_channels=2048), projection=nn.Linear(2048, 512))
labels = torch.arange(classes).repeat_interleave(per_class)
maps = torch.randn(len(labels), 2048, 7, 7, requires_grad=True)
loss = build_loss({{"metrix": {{"loss": {{"contrastive": {{"neg_margin": 0.5}}}}, "level": "feature", "mix_chunk": chunk}}}},
                  embedding_dim=512, num_classes=classes)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
loss.training_objective(model, maps, labels, kind="pos_neg", lam=0.5).backward()
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"mixed": len(mixing_triples(labels, "pos_neg")), "peak_mib": (peak - before) / 1024, "seconds": seconds}}))
"""

#: (batch label, classes, samples per class, mix_chunk)
CASES = [
    ("SOP-style 4 x 5", 4, 5, None),
    ("SOP-style 4 x 5", 4, 5, 256),
    ("SOP-style 8 x 5", 8, 5, None),
    ("SOP-style 8 x 5", 8, 5, 256),
    ("SOP recipe 20 x 5", 20, 5, 256),
]


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the smallest case only")
    args = parser.parse_args(argv)
    rows = []
    print(f"{'batch':20s} {'mix_chunk':>9s} {'mixed maps':>10s} {'peak MiB':>9s} {'seconds':>8s}")
    for label, classes, per_class, chunk in CASES[:2] if args.smoke else CASES:
        code = CHILD.format(classes=classes, per_class=per_class, chunk=chunk)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        row = {
            "batch": label,
            "mix_chunk": chunk,
            **json.loads(out.stdout.strip().splitlines()[-1]),
        }
        rows.append(row)
        print(
            f"{label:20s} {str(chunk):>9s} {row['mixed']:>10d} {row['peak_mib']:>9.0f} {row['seconds']:>8.1f}"
        )
    return rows


if __name__ == "__main__":
    main()
