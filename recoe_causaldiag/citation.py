"""How to cite the benchmark (the same facts as `CITATION.cff`, as BibTeX): the paper that defines causal
diagnosticity and this software at its version."""

from __future__ import annotations

from . import __version__

PAPER_ARXIV = "2502.18848"
PAPER_DOI = "10.18653/v1/2025.emnlp-main.1496"

PAPER_BIBTEX = f"""@inproceedings{{zaman2025causal,
  title     = {{A Causal Lens for Evaluating Faithfulness Metrics}},
  author    = {{Zaman, Kerem and Srivastava, Shashank}},
  booktitle = {{Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing}},
  pages     = {{29413--29437}},
  year      = {{2025}},
  doi       = {{{PAPER_DOI}}},
  eprint    = {{{PAPER_ARXIV}}},
  archivePrefix = {{arXiv}},
  url       = {{https://arxiv.org/abs/{PAPER_ARXIV}}}
}}"""
"""The paper that defines causal diagnosticity (EMNLP 2025), cited by the leaderboard and every dataset card."""

BIBTEX = f"""{PAPER_BIBTEX}

@software{{causal_diagnosticity,
  title   = {{causal-diagnosticity: a benchmark of faithfulness metrics for natural-language explanations of LLMs}},
  author  = {{{{causal-diagnosticity contributors}}}},
  version = {{{__version__}}},
  license = {{Apache-2.0}}
}}
"""
