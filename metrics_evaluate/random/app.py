import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("random")
launch_gradio_widget(module)
