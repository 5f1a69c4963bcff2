import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("simulatability")
launch_gradio_widget(module)
