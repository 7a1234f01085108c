"""Shrinking a failing run (``ha-testbed shrink``): the predicate language (:mod:`.predicate`), the
reductions (:mod:`.passes`), the greedy loop and its output (:mod:`.shrinker`) and the
one-session scenario file (:mod:`.repro`)."""
from ha.experiment.shrink.predicate import Predicate, Verdict, parse_predicate
from ha.experiment.shrink.shrinker import Shrinker, ShrinkResult, Size, shrink_cli

__all__ = ["Predicate", "Verdict", "parse_predicate", "Shrinker", "ShrinkResult", "Size", "shrink_cli"]
