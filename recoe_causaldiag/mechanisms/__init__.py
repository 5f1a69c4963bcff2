"""The mechanisms that metrics are built from: explanation corruptions (truncation, fillers, helper-LM rewrites),
input interventions, activation patching, and the prompt and word helpers they share (label requests, token
positions, content words). None of them is a registered metric."""
