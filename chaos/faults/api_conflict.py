"""api-conflict: with a probability per call, a covered write of the instance is not made and
fails with 409 Conflict (a write that lost a race); ``bind_many`` draws per binding.

Injector: :class:`chaos.injectors.api.ApiChaos` around the instance's API client.
"""
from __future__ import annotations

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import ApiParams, Probability


class Params(ApiParams):
    probability: Probability


class ApiConflict(HookFault):
    name = "api-conflict"
    doc = "the instance's writes fail with 409 Conflict with a probability"
    order = 90
    Params = Params
    injector = "api"
    example = {"at": "5s", "for": "20s", "fault": "api-conflict", "probability": 0.2,
               "verbs": ["bind", "bind_many"]}
    draw = Draw("span", "api conflict", "slateblue")


FAULT = ApiConflict()
