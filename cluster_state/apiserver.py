"""The API server's own configuration: what a real kube-apiserver takes as flags and feature
gates, which every client of one run must share (the "server" here is Redis plus the Lua the
clients send, so each client carries the configuration into its requests).

``ApiServerConfig(clear_nnn_on_binding=..., history=...)``; ``sync_client(url, prefix)`` /
``async_client(url, prefix)`` build clients under it; ``to_dict()`` is what a run records.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ApiServerConfig"]


@dataclass(frozen=True)
class ApiServerConfig:
    # feature gate ClearingNominatedNodeNameAfterBinding: pods/binding clears status.nominatedNodeName
    clear_nnn_on_binding: bool = False
    # watch history kept per kind (events); a watch from an older resourceVersion gets 410 Gone
    history: int = 100_000

    def __post_init__(self):
        if isinstance(self.history, bool) or not isinstance(self.history, int) or self.history < 1:
            raise ValueError(f"API server history must be a positive integer, got {self.history!r}")

    def client_kwargs(self) -> dict:
        return {"history": self.history, "clear_nnn_on_binding": self.clear_nnn_on_binding}

    def sync_client(self, url: str, prefix: str = "ht"):
        from cluster_state.client import ApiClient
        return ApiClient.from_url(url, prefix, **self.client_kwargs())

    def async_client(self, url: str, prefix: str = "ht"):
        from cluster_state.aio import AsyncApiClient
        return AsyncApiClient.from_url(url, prefix, **self.client_kwargs())

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "ApiServerConfig":
        return cls(**(d or {}))
