"""Cost/speed review: scaling metrics, reports with plots, and the planner."""
