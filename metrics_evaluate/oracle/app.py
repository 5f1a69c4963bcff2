import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("oracle")
launch_gradio_widget(module)
