from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS, FILLERS, FillerTokens


def test_fillers_and_modes():
    assert set(FILLERS.values()) == {"...", "***", "---", "$$$", "¶¶¶"}
    by_name = {c.name: c for c in CORRUPTIONS}
    assert by_name["repeating-dots"].apply("abcd") == "............"
    assert by_name["repeating-pilcrows"].apply("ab") == "¶¶¶¶¶¶"
    assert by_name["non_repeating-pilcrows"].apply("abcd") == "¶¶¶"
    assert len(FillerTokens().variants) == 2 * 5 * 2
    assert FillerTokens().variants[:2] == ("repeating-dots-continuous", "repeating-dots-binary")
