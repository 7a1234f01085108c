"""cache_divergence: per instance, tasks whose (status, node) in its cache differ from what an
up-to-date cache under the same profile holds (the replay of the API server's events; judged
against the truth anywhere in the tick's sampling window: see oracles.CacheDivergence)."""
from ha.experiment.checkers._fold import reference_checker

NAME = "cache_divergence"
HEADLINE = "max"
CONTRACT = True

check, columns = reference_checker("divergence", "no instance with a synced cache was sampled",
                                   ("cache_divergence", "cache_divergence_persistent"))
