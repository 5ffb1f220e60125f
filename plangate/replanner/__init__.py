"""Re-planning: after a final failure, a model (or a playbook) routes from the world as the
completed steps left it to the goal, within a budget."""
