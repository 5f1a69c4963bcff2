import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("diagnosticity")
launch_gradio_widget(module)
