"""Everything that touches the world: the tool activities and the probe activity."""
