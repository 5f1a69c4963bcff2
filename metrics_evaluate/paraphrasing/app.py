import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("paraphrasing")
launch_gradio_widget(module)
