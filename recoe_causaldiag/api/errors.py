"""The mistakes a user can make, and the refusals a run can meet, that the command line reports as one line. They
live apart from the code that raises them (which needs torch, transformers or datasets), so reporting one imports
nothing heavy."""

from __future__ import annotations


class RecordError(ValueError):
    """A record breaks the schema; the message names the row and the field."""

    def __init__(self, row: str, field_name: str, problem: str) -> None:
        super().__init__(f"row {row}: field '{field_name}': {problem}")
        self.row, self.field_name, self.problem = row, field_name, problem


class EditError(ValueError):
    """An edit that cannot be made; the message names what to change (the model type and option, or the pair and
    field)."""


class LabelTokenError(ValueError):
    """The label set cannot be scored as distinct single next tokens for this tokenizer."""


class PublishError(RuntimeError):
    """The Hub could not be reached or refused the upload."""
