import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("early_answering")
launch_gradio_widget(module)
