"""The mechanisms that metrics are built from: explanation corruptions (truncation, fillers, helper-LM rewrites),
input interventions, and activation patching. None of them is a metric; none is registered."""
