"""Weight editors (issue 15): ROME's rank-one update of one MLP output matrix, the edited matrices located per
architecture, the key statistics estimated offline, and edits applied and reverted exactly."""
