"""Fault injectors: watch (delivery hook), proxy (Redis TCP), api (client wrapper), process."""
