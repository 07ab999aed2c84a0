"""mule: an honest agent loop."""
