"""The world layer shared by tools and probes: settings, clients, path confinement, errors."""
