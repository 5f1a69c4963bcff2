"""Editors (issue 15): how a run's edits reach the model. ICE tells them in context; ROME (a rank-one update of one
MLP output matrix) and MEMIT (many facts spread over a range of layers) write them into the weights, with the edited
matrices located per architecture, the key statistics estimated offline, edits applied per group of requests and
reverted exactly (`editing`), and their quality measured (`quality`)."""
