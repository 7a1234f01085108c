"""Vocabulary the API server (``cluster_state``) and the scheduler model (``ha.scheduler``) share
without importing each other — Kubernetes' apimachinery: resource quantities and the base of the
typed bad-input errors. Pure Python, no I/O."""
