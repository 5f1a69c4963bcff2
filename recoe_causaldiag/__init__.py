"""causal-diagnosticity: which faithfulness metric for LLM explanations can be trusted."""

__version__ = "0.2.0"
