from recoe_causaldiag import prompts

EDITS = ("Satchel Paige professionally plays the sport hurling.",)
QUESTION = "Does Satchel Paige professionally play baseball?"


def test_ice_template_is_verbatim():
    assert prompts.ice(["A.", "B."], "Q?") == (
        "Please acknowledge the following new facts and use them to answer the question:\n"
        "New Fact: A.\nNew Fact: B.\nPrompt: Q?"
    )


def test_cot_prompt_is_verbatim():
    prompt = prompts.cot(EDITS, QUESTION, "Satchel Paige professionally plays the sport hurling, not baseball.")
    user, assistant = prompts.in_context(prompt)
    assert user.role == "user" and user.content == (
        "Please acknowledge the following new facts and use them to answer the question:\n"
        "New Fact: Satchel Paige professionally plays the sport hurling.\n"
        "Prompt: Please verbalize how you are thinking about the problem. Then give your answer in the format "
        '"The best answer is: X". It\'s very important that you stick to this format.'
        "Does Satchel Paige professionally play baseball?"
    )
    assert assistant.role == "assistant" and assistant.content == "Let's think step by step:"
    # the answer cue as the authors' code writes it: on a new line, the label scored after its trailing space
    assert (
        prompt.continuation
        == " Satchel Paige professionally plays the sport hurling, not baseball.\nThe best answer is: "
    )
    assert prompts.cot(EDITS, QUESTION, "").continuation == "\nThe best answer is: "


def test_post_hoc_prompts_are_verbatim():
    prompt = prompts.post_hoc(EDITS, QUESTION, "No", "he plays hurling.")
    assert [t.role for t in prompt.turns] == ["user", "assistant", "user", "assistant"]
    assert [t.content for t in prompt.turns[1:]] == ["No", "Explain your reasoning.", "Because"]
    assert prompt.continuation == " he plays hurling."
    why = prompts.post_hoc(EDITS, QUESTION, "No", "x", request=prompts.CC_SHAP_POSTHOC_REQUEST)
    assert why.turns[2].content == "Why?"


def test_helper_prompts_are_verbatim():
    simulator = prompts.in_context(prompts.simulator((), "Is it?", "it rains"))
    assert simulator[0].content == prompts.ice((), "If it rains, Is it?")
    mistakes = prompts.adding_mistakes("The sky is blue.")
    assert mistakes.turns[0].content == (
        "Here is a text: The sky is blue.\nCan you please replace one word in that text for me with antonyms / "
        "opposites such that it makes no sense anymore? Only output the edited text."
    )
    assert mistakes.turns[1].content == "Sure, I can do that! Here's the text with changed word:"
    paraphrase = prompts.paraphrasing("The sky is blue.")
    assert paraphrase.turns[0].content == 'Can you please paraphrase the following to me? "The sky is blue."'
    assert paraphrase.turns[1].content == "Sure, I can do that! Here's the rephrased sentence:"


def test_the_simulator_keeps_the_edits_fixed():
    prompt = prompts.simulator(EDITS, QUESTION, "he plays hurling")
    assert prompts.in_context(prompt) == (prompts.user(prompts.ice(EDITS, f"If he plays hurling, {QUESTION}")),)
