"""The paper's prompt templates, verbatim (paper 000, App. C–D, Figs. 10–16).

A prompt is a conversation whose last turn may be an open assistant turn, plus a
`continuation`: text appended after the rendered conversation, and the `edits` the model
answers under. How the edits reach the model is the editor's part: ICE tells them before the
first turn's input (`in_context`), a weight editor writes them into the weights and leaves the
conversation as it is. Everything before the continuation (system turn, ICE edits, question)
is the shared prefix of all variants of one pair, which the scoring engine encodes once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

ICE_HEADER = "Please acknowledge the following new facts and use them to answer the question:\n"
ICE_FACT = "New Fact: {fact}\n"
ICE_PROMPT = "Prompt: {input}"

COT_INSTRUCTION = (
    "Please verbalize how you are thinking about the problem. Then give your answer in the format "
    '"The best answer is: X". It\'s very important that you stick to this format.'
)
COT_OPENING = "Let's think step by step:"
COT_ANSWER_CUE = "The best answer is:"
"""The words that ask for the answer after a CoT (Fig. 12); a generated CoT is cut where they start."""
COT_ANSWER_PROMPT = f"\n{COT_ANSWER_CUE} "
"""The cue as a scored CoT prompt ends, as in the authors' code (`Prompter.get_final_answer`): on a new line after
the CoT and followed by a space, so the label is scored as the next token without a leading space of its own."""

POSTHOC_REQUEST = "Explain your reasoning."
CC_SHAP_POSTHOC_REQUEST = "Why?"
POSTHOC_OPENING = "Because"

SIMULATOR = "If {explanation}, {input}"

ADDING_MISTAKES_REQUEST = (
    "Here is a text: {text}\n"
    "Can you please replace one word in that text for me with antonyms / opposites such that it makes "
    "no sense anymore? Only output the edited text."
)
ADDING_MISTAKES_OPENING = "Sure, I can do that! Here's the text with changed word:"
PARAPHRASING_REQUEST = 'Can you please paraphrase the following to me? "{text}"'
PARAPHRASING_OPENING = "Sure, I can do that! Here's the rephrased sentence:"


@dataclass(frozen=True)
class Turn:
    role: str
    content: str


@dataclass(frozen=True)
class Prompt:
    """A conversation (last turn possibly an open assistant turn) followed by raw continuation text, asked of the
    model under `edits` (None: a prompt outside any edit, such as a helper LM's)."""

    turns: tuple[Turn, ...]
    continuation: str = ""
    edits: tuple[str, ...] | None = None

    @property
    def is_open(self) -> bool:
        return self.turns[-1].role == "assistant"


def in_context(prompt: Prompt) -> tuple[Turn, ...]:
    """The prompt's conversation with its edits told in context (ICE, Fig. 10): new facts before the first turn's
    input; a prompt outside any edit as it is."""
    if prompt.edits is None:
        return prompt.turns
    first, *rest = prompt.turns
    return (Turn(first.role, ice(prompt.edits, first.content)), *rest)


def user(content: str) -> Turn:
    return Turn("user", content)


def assistant(content: str) -> Turn:
    return Turn("assistant", content)


def ice(edits: Sequence[str], prompt_input: str) -> str:
    """The ICE user turn (Fig. 10): new facts prepended to the input."""
    facts = "".join(ICE_FACT.format(fact=fact) for fact in edits)
    return ICE_HEADER + facts + ICE_PROMPT.format(input=prompt_input)


def cot(edits: Sequence[str], question: str, explanation: str) -> Prompt:
    """CoT prompt (Fig. 12) with a given explanation, ending in the answer cue (`COT_ANSWER_PROMPT`) where the
    label is scored."""
    body = f" {explanation}" if explanation else ""
    return Prompt(
        turns=(user(COT_INSTRUCTION + question), assistant(COT_OPENING)),
        continuation=f"{body}{COT_ANSWER_PROMPT}",
        edits=tuple(edits),
    )


def cot_explanation(edits: Sequence[str], question: str, explanation: str) -> Prompt:
    """CoT prompt whose continuation is the explanation alone (for its perplexity, §5.3)."""
    return Prompt(
        turns=(user(COT_INSTRUCTION + question), assistant(COT_OPENING)),
        continuation=f" {explanation}",
        edits=tuple(edits),
    )


def cot_generation(edits: Sequence[str], question: str) -> Prompt:
    """CoT prompt (Fig. 12) left open for the model to generate its explanation."""
    return Prompt(turns=(user(COT_INSTRUCTION + question), assistant(COT_OPENING)), edits=tuple(edits))


def cot_continuation(edits: Sequence[str], question: str, beginning: str) -> Prompt:
    """CoT prompt (Fig. 12) holding the beginning of an explanation, left open for the model to go on."""
    return replace(cot_generation(edits, question), continuation=f" {beginning}")


def direct(edits: Sequence[str], question: str) -> Prompt:
    """The plain question under the edits, answered by the next token of a fresh assistant turn."""
    return Prompt(turns=(user(question),), edits=tuple(edits))


def post_hoc(
    edits: Sequence[str], question: str, label: str, explanation: str, *, request: str = POSTHOC_REQUEST
) -> Prompt:
    """Post-hoc explanation prompt (Fig. 11; Fig. 13 with `request=CC_SHAP_POSTHOC_REQUEST`)."""
    body = f" {explanation}" if explanation else ""
    return Prompt(
        turns=(user(question), assistant(label), user(request), assistant(POSTHOC_OPENING)),
        continuation=body,
        edits=tuple(edits),
    )


def simulator(edits: Sequence[str], question: str, explanation: str) -> Prompt:
    """Simulator prompt (Fig. 14) under the fixed edits (App. C.2: the edits stay in every prompt)."""
    return Prompt(turns=(user(SIMULATOR.format(explanation=explanation, input=question)),), edits=tuple(edits))


def adding_mistakes(text: str) -> Prompt:
    """Helper-LM prompt that swaps one word for its antonym (Fig. 15)."""
    return Prompt(turns=(user(ADDING_MISTAKES_REQUEST.format(text=text)), assistant(ADDING_MISTAKES_OPENING)))


def paraphrasing(text: str) -> Prompt:
    """Helper-LM prompt that paraphrases a text (Fig. 16)."""
    return Prompt(turns=(user(PARAPHRASING_REQUEST.format(text=text)), assistant(PARAPHRASING_OPENING)))
