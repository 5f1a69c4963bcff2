import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("causal_faithfulness")
launch_gradio_widget(module)
