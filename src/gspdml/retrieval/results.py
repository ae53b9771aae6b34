"""One object for the answer of a retrieval: the CLI prints it, the report draws it.

After OML's ``RetrievalResults`` (spec/ecosystem.md §5, lesson 6): the ranked neighbours of
every query plus what is needed to judge and show them (paths and labels of both sides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch


@dataclass
class RetrievalResults:
    """``distances``/``indices`` ``[Q, k]`` (row q sorted by increasing distance), indices into the
    gallery; query and gallery paths and labels (a label is None where unknown)."""

    distances: torch.Tensor
    indices: torch.Tensor
    query_paths: Sequence[str]
    gallery_paths: Sequence[str]
    query_labels: Sequence[Optional[str]]
    gallery_labels: Sequence[Optional[str]]
    metric: str = "euclidean"

    def __post_init__(self):
        q = len(self.query_paths)
        if self.distances.shape != self.indices.shape or self.distances.shape[0] != q or len(self.query_labels) != q:
            raise ValueError(
                f"inconsistent results: distances {tuple(self.distances.shape)}, indices {tuple(self.indices.shape)}, "
                f"{q} query paths, {len(self.query_labels)} query labels"
            )

    @property
    def k(self) -> int:
        return int(self.indices.shape[1])

    def correct(self) -> list[list[Optional[bool]]]:
        """Per result: same label as the query; None where either label is unknown."""
        marks = []
        for query_label, row in zip(self.query_labels, self.indices.tolist()):
            marks.append([
                None if query_label is None or self.gallery_labels[j] is None else self.gallery_labels[j] == query_label
                for j in row
            ])
        return marks

    def to_dict(self) -> list[dict[str, Any]]:
        """JSON-ready: one entry per query with its ranked results."""
        out = []
        for q, (dist_row, index_row, marks) in enumerate(zip(self.distances.tolist(), self.indices.tolist(), self.correct())):
            results = [
                {"rank": r + 1, "path": self.gallery_paths[j], "label": self.gallery_labels[j], "distance": d, "correct": m}
                for r, (d, j, m) in enumerate(zip(dist_row, index_row, marks))
            ]
            out.append({"query": self.query_paths[q], "label": self.query_labels[q], "metric": self.metric, "results": results})
        return out

    def format_text(self) -> str:
        """Plain text: per query, rank, distance, path and label of each result."""
        lines = []
        for entry in self.to_dict():
            lines.append(f"query: {entry['query']}" + (f"  [{entry['label']}]" if entry["label"] is not None else ""))
            for result in entry["results"]:
                label = f"  [{result['label']}]" if result["label"] is not None else ""
                lines.append(f"  {result['rank']:>3}  {result['distance']:.6f}  {result['path']}{label}")
        return "\n".join(lines)
