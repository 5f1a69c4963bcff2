import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("counterfactual_test")
launch_gradio_widget(module)
