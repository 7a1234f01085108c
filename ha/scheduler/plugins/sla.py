"""sla: job waiting-time service level (Volcano ``plugins/sla/sla.go``).

* The waiting time of a job is its PodGroup's ``sla-waiting-time`` annotation, else the plugin's
  ``sla-waiting-time`` argument (a Go duration, e.g. ``3m``, ``1h2m3s``); an argument that does not
  parse or is not positive leaves no global waiting time (Volcano logs it and goes on).
* JobOrder: jobs with a waiting time first; among them the earlier deadline
  (creationTimestamp + waiting time) first; equal deadlines or no waiting time on both: 0.
* JobEnqueueable and JobPipelined: Permit once a job has waited its waiting time
  (now − creationTimestamp ≥ waiting time), Abstain otherwise or without a waiting time.

"now" comes from the session's clock (``ssn.clock.now()``), where Go's
``time.Since`` does. Scenario jobs have creation timestamp 0, so any waiting time has passed.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.api.duration import parse_go_duration
from ha.scheduler.api.job_info import JOB_WAITING_TIME
from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import ABSTAIN, PERMIT, Plugin

PLUGIN_NAME = "sla"


def session_now(ssn: Any) -> float:
    """Seconds since the epoch by the session's clock (every session has one: the model reads no
    other time)."""
    return float(ssn.clock.now())


def global_waiting_time(arguments: Mapping[str, Any]) -> float | None:
    if JOB_WAITING_TIME not in arguments:
        return None
    raw = arguments[JOB_WAITING_TIME]
    try:
        secs = parse_go_duration(raw if isinstance(raw, str) else "")
    except ValueError:
        return None
    return secs if secs > 0 else None


@register(PLUGIN_NAME)
class SlaPlugin(Plugin):
    plugin_name = PLUGIN_NAME
    argument_keys = (JOB_WAITING_TIME,)

    def __init__(self, arguments: Mapping[str, Any] | None = None):
        super().__init__(arguments)
        self.job_waiting_time: float | None = None

    def waiting_time(self, job: Any) -> float | None:
        own = getattr(job, "waiting_time", None)
        return self.job_waiting_time if own is None else own

    def job_order(self, l: Any, r: Any) -> int:
        lw, rw = self.waiting_time(l), self.waiting_time(r)
        if lw is None:
            return 0 if rw is None else 1
        if rw is None:
            return -1
        ld, rd = l.creation_timestamp + lw, r.creation_timestamp + rw
        return -1 if ld < rd else (1 if ld > rd else 0)

    def on_session_open(self, ssn: Any) -> None:
        self.job_waiting_time = global_waiting_time(self.arguments)

        def permitable(job: Any) -> int:
            jwt = self.waiting_time(job)
            if jwt is None or session_now(ssn) - job.creation_timestamp < jwt:
                return ABSTAIN
            return PERMIT

        ssn.add_job_order_fn(self.name(), self.job_order)
        ssn.add_job_enqueueable_fn(self.name(), permitable)
        ssn.add_job_pipelined_fn(self.name(), permitable)
