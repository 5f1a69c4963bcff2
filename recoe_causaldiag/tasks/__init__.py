"""The benchmark's datasets and the tasks they hold (a task is `<dataset>` or `<dataset>/<config>`): importing
this package registers each dataset's builder, curated sources, card and task hooks in the contract's registries."""

from __future__ import annotations

from ..api.task import DATASETS, TASKS, DatasetSpec, register_dataset
from .analogy import build_analogy
from .factcheck import build_factcheck
from .factcheck_counterfactual import factcheck_counterfactual
from .multihop import build_multihop
from .object_counting import build_object_counting
from .object_counting_counterfactual import counting_counterfactual
from .recoe import RECOE_SCHEMES, build_recoe

DATASET_VERSION = "1.0.0"
RELEASE_DATE = "2026-11-22"

register_dataset(DatasetSpec("factcheck", "Causal Diagnosticity: FactCheck",
                             lambda seed: {"default": build_factcheck(seed)},
                             sources=("factcheck_relations.csv", "factcheck_facts.csv"), card="factcheck.md",
                             counterfactual=factcheck_counterfactual))
register_dataset(DatasetSpec("analogy", "Causal Diagnosticity: Analogy", lambda seed: {"default": build_analogy(seed)},
                             sources=("analogy_overrides.csv",), card="analogy.md"))
register_dataset(DatasetSpec("object_counting", "Causal Diagnosticity: Object Counting",
                             lambda seed: {"default": build_object_counting(seed)},
                             sources=("object_counting_entities.csv",), card="object_counting.md",
                             counterfactual=counting_counterfactual))
register_dataset(DatasetSpec("multihop", "Causal Diagnosticity: Multi-hop",
                             lambda seed: {"default": build_multihop(seed)},
                             sources=("multihop_items.jsonl",), card="multihop.md"))
register_dataset(DatasetSpec("recoe", "Causal Diagnosticity: ReCoE reasoning schemes", build_recoe, RECOE_SCHEMES,
                             sources=("recoe_mountains.csv", "recoe_planets.csv", "recoe_rivers.csv"), card="recoe.md"))


__all__ = ["DATASETS", "DATASET_VERSION", "RELEASE_DATE", "RECOE_SCHEMES", "TASKS", "DatasetSpec"]
