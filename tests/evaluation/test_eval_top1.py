"""Top-1 accuracy against a slow loop over the rows, ties included."""

import torch

from gspdml.evaluation.top1 import correct_top1, top1_accuracy


def _slow_correct(logits, labels):
    count = 0
    for row, label in zip(logits.tolist(), labels.tolist()):
        best = max(range(len(row)), key=lambda c: (row[c], -c))  # the first largest
        count += best == label
    return count


def test_top1_equals_a_slow_loop_with_ties():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randint(0, 4, (200, 6), generator=generator).float()  # many ties
    labels = torch.randint(0, 6, (200,), generator=generator)
    assert correct_top1(logits, labels) == _slow_correct(logits, labels)
    batches = [(logits[i : i + 64], labels[i : i + 64]) for i in range(0, 200, 64)]
    assert top1_accuracy(lambda x: x, batches) == _slow_correct(logits, labels) / 200
    # a tie counts for the lowest class index only
    tied = torch.tensor([[1.0, 3.0, 3.0]])
    assert correct_top1(tied, torch.tensor([1])) == 1 and correct_top1(tied, torch.tensor([2])) == 0
