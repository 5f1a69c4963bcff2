"""BibTeX entries cited by more than one metric or module."""

LANHAM_2023 = """@article{lanham2023measuring,
  title={Measuring Faithfulness in Chain-of-Thought Reasoning},
  author={Lanham, Tamera and others}, journal={arXiv preprint arXiv:2307.13702}, year={2023}
}"""

SIEGEL_2024 = """@inproceedings{siegel2024probabilities,
  title={The Probabilities Also Matter: A More Faithful Metric for Faithfulness of Free-Text Explanations in
         Large Language Models},
  author={Siegel, Noah Y. and Camburu, Oana-Maria and Heess, Nicolas and Perez-Ortiz, Maria},
  booktitle={Proceedings of ACL (Short Papers)}, year={2024},
  eprint={2404.03189}, archivePrefix={arXiv}, url={https://arxiv.org/abs/2404.03189}
}"""
