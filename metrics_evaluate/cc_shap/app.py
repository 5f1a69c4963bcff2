import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("cc_shap")
launch_gradio_widget(module)
