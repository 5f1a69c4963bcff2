from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS, FILLERS, FillerTokens


def test_fillers_and_modes():
    assert set(FILLERS.values()) == {"...", "***", "---", "$$$", "¶¶¶"}
    by_name = {c.name: c for c in CORRUPTIONS}
    assert by_name["repeating-dots"].apply("abcd") == "... ... ... ..."
    assert by_name["repeating-pilcrows"].apply("ab") == "¶¶¶ ¶¶¶"
    assert by_name["non_repeating-pilcrows"].apply("abcd") == "¶¶¶"
    assert len(FillerTokens().variants) == 2 * 5 * 2
    assert FillerTokens().variants[:2] == ("repeating-dots-continuous", "repeating-dots-binary")


def test_repeating_fillers_are_the_authors_spaced_words_so_filler_type_is_not_confounded_with_length(default_lm):
    """With the CoT prompt's space before the explanation, the corrupted CoT is `(" " + filler) * len(ε)` as in the
    authors' `LanhamFiller`: one filler word per character, so the common fillers no longer merge into a handful of
    tokens (unspaced, 67 characters of dots were 14 SmolLM2 tokens and of pilcrows 402)."""
    from recoe_causaldiag import prompts

    explanation = "Babe Ruth plays baseball, so the claim is true."
    by_name = {c.name: c for c in CORRUPTIONS}
    for name, filler in FILLERS.items():
        corrupted = prompts.cot((), "Q?", by_name[f"repeating-{name}"].apply(explanation))
        assert corrupted.continuation == (" " + filler) * len(explanation) + prompts.COT_ANSWER_PROMPT
    counts = {
        name: len(default_lm.encode(by_name[f"repeating-{name}"].apply(explanation), continuation=True))
        for name in FILLERS
    }
    assert counts["dots"] == counts["stars"] == counts["dashes"] == len(explanation), counts
