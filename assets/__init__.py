"""Files stormdeck ships: default rule thresholds, the stylesheet, demo recordings."""
