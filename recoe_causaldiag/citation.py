"""How to cite the benchmark (the same facts as `CITATION.cff`, as BibTeX): the paper that defines causal
diagnosticity and this software at its version."""

from __future__ import annotations

from . import __version__

PAPER_URL = "https://github.com/KeremZaman/CausalDiagnosticity"

BIBTEX = f"""@inproceedings{{zaman2025causal,
  title  = {{A Causal Lens for Evaluating Faithfulness Metrics}},
  author = {{Zaman, Kerem and Srivastava, Shashank}},
  year   = {{2025}},
  url    = {{{PAPER_URL}}}
}}

@software{{causal_diagnosticity,
  title   = {{causal-diagnosticity: a benchmark of faithfulness metrics for natural-language explanations of LLMs}},
  author  = {{{{causal-diagnosticity contributors}}}},
  version = {{{__version__}}},
  license = {{Apache-2.0}}
}}
"""
