"""The benchmark's datasets and the tasks they hold (a task is `<dataset>` or `<dataset>/<config>`): importing
this package registers each dataset's builder, curated sources (files of `builders/sources/`), card template (a file
of `dataset_cards/`) and task hooks in the contract's registries."""

from __future__ import annotations

from ..api.task import DATASETS, TASKS, DatasetSpec, register_dataset
from ..defaults import DATASET_VERSION, RELEASE_DATE
from .analogy import OVERRIDES_FILE, PHRASINGS_FILE, build_analogy
from .factcheck import FACTS_FILE, RELATIONS_FILE, build_factcheck
from .factcheck_counterfactual import factcheck_counterfactual
from .multihop import ITEMS_FILE, build_multihop
from .object_counting import ENTITIES_FILE, build_object_counting
from .object_counting_counterfactual import counting_counterfactual
from .recoe import RECOE_SCHEMES, build_recoe
from .recoe.domains import CURATED

register_dataset(
    DatasetSpec(
        "factcheck",
        "Causal Diagnosticity: FactCheck",
        lambda seed: {"default": build_factcheck(seed)},
        sources=(RELATIONS_FILE, FACTS_FILE),
        card="factcheck.md",
        counterfactual=factcheck_counterfactual,
        role_metadata=(("object_edit", "object_counter"),),
    )
)
register_dataset(
    DatasetSpec(
        "analogy",
        "Causal Diagnosticity: Analogy",
        lambda seed: {"default": build_analogy(seed)},
        sources=(OVERRIDES_FILE, PHRASINGS_FILE),
        card="analogy.md",
        roles_swappable=False,
    )
)
register_dataset(
    DatasetSpec(
        "object_counting",
        "Causal Diagnosticity: Object Counting",
        lambda seed: {"default": build_object_counting(seed)},
        sources=(ENTITIES_FILE,),
        card="object_counting.md",
        counterfactual=counting_counterfactual,
        role_metadata=(("types_edits", "types_counter_edits"),),
    )
)
register_dataset(
    DatasetSpec(
        "multihop",
        "Causal Diagnosticity: Multi-hop",
        lambda seed: {"default": build_multihop(seed)},
        sources=(ITEMS_FILE,),
        card="multihop.md",
    )
)
register_dataset(
    DatasetSpec(
        "recoe",
        "Causal Diagnosticity: ReCoE reasoning schemes",
        build_recoe,
        RECOE_SCHEMES,
        sources=tuple(table.file for table in CURATED),
        card="recoe.md",
    )
)


__all__ = ["DATASETS", "DATASET_VERSION", "RELEASE_DATE", "RECOE_SCHEMES", "TASKS", "DatasetSpec"]
