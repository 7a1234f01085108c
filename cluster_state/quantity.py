"""Kubernetes resource quantities: :mod:`apimachinery.quantity` (shared with the scheduler model,
which must not import the API server), re-exported under the API server's name."""
from apimachinery.quantity import QuantityError, format_quantity, normalise_resources, parse_quantity

__all__ = ["QuantityError", "parse_quantity", "format_quantity", "normalise_resources"]
