"""Dataset-level faithfulness statistics (CT, CCT): one number over many interventions, not per instance, so
they are not registered as per-instance metrics; each module shares its name with its `evaluate` folder."""
