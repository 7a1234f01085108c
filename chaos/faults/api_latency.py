"""api-latency: each call of a covered verb an instance makes waits a delay drawn from a
distribution first (a slow API server as the client sees it).

Injector: :class:`chaos.injectors.api.ApiChaos` around the instance's API client.
"""
from __future__ import annotations

from pydantic import Field

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import ApiParams, Delay


class Params(ApiParams):
    delay: Delay = Field(description="the delay of each call")


class ApiLatency(HookFault):
    name = "api-latency"
    doc = "the instance's API calls (writes by default) wait a delay drawn from a distribution"
    order = 80
    Params = Params
    injector = "api"
    example = {"at": "5s", "for": "20s", "fault": "api-latency", "target": "scheduler-1",
               "delay": {"dist": "uniform", "min": "10ms", "max": "50ms"}}
    draw = Draw("span", "api latency", "teal")


FAULT = ApiLatency()
