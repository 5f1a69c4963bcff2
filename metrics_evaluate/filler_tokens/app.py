from pathlib import Path

import evaluate

from recoe_causaldiag.evaluate_space import module_page

HERE = Path(__file__).resolve().parent
module = evaluate.load(str(HERE / "filler_tokens.py"))
module_page(module, HERE / "README.md").launch()
