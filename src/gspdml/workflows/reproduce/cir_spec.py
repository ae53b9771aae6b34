"""A row of a composed-image-retrieval table as a pinned evaluation (``gspdml reproduce``'s
``cir`` protocol, run by :mod:`gspdml.workflows.reproduce.cir_run`).

A :class:`CirSpec` names what the thesis evaluated: the method and its parameters
(:class:`~gspdml.cir.evaluation.CirMethod`), the benchmarks (one per evaluation; Table 4.5's
rows span all four FreeDom benchmarks), the vision-language model, the AP definition of the
chapter's code and FreeDom's visual memory. What differs per machine (the data folder, the
vocabulary file, an external memory's file, a local checkpoint) is given when the table runs.

Benchmarks: the FreeDom domain-conversion datasets in the layout of the authors' release
(``imagenet_r``, ``minidn``, ``nico``, ``ltll``; :mod:`gspdml.cir.domain_datasets`) and
``patterncom``, the PatternCom protocol on a PatternNet tree (:mod:`gspdml.cir.patterncom`), and
the generic benchmarks ``fashioniq``, ``cirr``, ``circo`` of Table 4.7 in their official layouts
(:mod:`gspdml.cir.generic_datasets`).
Source and target domains are those of each benchmark's protocol: every query image paired
with every other domain (Psomas thesis §4.4.1) or, on PatternCom, with every other value of an
attribute of its class (§5.4.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gspdml.cir.domain_datasets import DOMAIN_DATASETS
from gspdml.cir.evaluation import CirMethod
from gspdml.cir.generic_datasets import GENERIC_BENCHMARKS
from gspdml.cir.ranking import AP_VARIANTS

#: every benchmark a CIR row may evaluate on
BENCHMARKS = (*DOMAIN_DATASETS, "patterncom", *GENERIC_BENCHMARKS)
#: FreeDom's visual memory Z (Eq. 4.13): the database, an external image set, or both (Table 4.5)
MEMORIES = ("database", "external", "union")


@dataclass(frozen=True)
class CirSpec:
    """One row's evaluation: ``method`` with ``model`` (a model spec of
    :func:`gspdml.cir.backends.load_model`: ``clip``, ``remoteclip``, ...) on each of
    ``benchmarks``, mAP by the ``ap`` definition, FreeDom's visual memory ``memory``."""

    method: CirMethod
    benchmarks: tuple[str, ...]
    model: str = "clip"
    ap: str = "trapezoid"
    memory: str = "database"

    def __post_init__(self) -> None:
        unknown = [b for b in self.benchmarks if b not in BENCHMARKS]
        if not self.benchmarks or unknown:
            raise ValueError(f"CIR benchmarks must be some of {BENCHMARKS}, got {self.benchmarks}")
        if self.ap not in AP_VARIANTS:
            raise ValueError(f"unknown AP definition {self.ap!r}; choose one of {AP_VARIANTS}")
        if self.memory not in MEMORIES:
            raise ValueError(f"unknown visual memory {self.memory!r}; choose one of {MEMORIES}")
        if self.memory != "database" and self.method.name != "freedom":
            raise ValueError(f"only FreeDom has a visual memory, not {self.method.name}")

    def describe(self, model: Optional[str] = None) -> str:
        """What runs, in a few words: ``freedom L+a, clip``, ``weicom λ=0.6, remoteclip``
        (``model``: the model spec that replaced the row's)."""
        method = self.method
        parts = [method.name]
        if method.name == "freedom":
            parts.append(method.variant)
            default = CirMethod(variant=method.variant)
            parts += [
                f"{name}={getattr(method, name)}"
                for name in ("k", "n", "m")
                if getattr(method, name) != getattr(default, name)
            ]
            if method.oracle != "none":
                parts.append(f"{method.oracle} oracle")
            if self.memory != "database":
                parts.append(f"{self.memory} memory")
        if method.name == "weicom":
            parts.append(f"λ={method.lam:g}")
        return f"{' '.join(parts)}, {model or self.model}"
