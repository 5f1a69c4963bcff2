import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("filler_tokens")
launch_gradio_widget(module)
