import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("adding_mistakes")
launch_gradio_widget(module)
