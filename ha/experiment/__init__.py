"""Experiments: the YAML experiment file (config), the runner behind ``ha-testbed run``, the
recorded history it writes (history), the checkers that compute every metric from that history
(checkers, analyze) and the results folder's views (results, report, compare)."""
