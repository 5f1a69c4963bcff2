"""What the command line shows before anything heavy is imported: the dataset release and the default model.
Their owners (`tasks`, `models`) re-export them."""

DATASET_VERSION = "1.4.0"
RELEASE_DATE = "2026-11-26"

DEFAULT_MODEL = "smollm2-135m-instruct"
"""The embedded default: SmolLM2-135M-Instruct, packaged offline (`packaged_models.PACKAGED_MODELS`)."""
