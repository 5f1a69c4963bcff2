import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("cct_pair")
launch_gradio_widget(module)
