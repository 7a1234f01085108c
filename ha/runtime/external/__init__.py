"""Scheduler instances that are external processes: the real ``vc-scheduler`` as a testbed instance.

* ``protocol`` -- :class:`SchedulerInstanceProtocol`, the seam the driver, the targets and the
  recorder talk to: what a model instance (``ha.runtime.instance``) fulfils and an external
  scheduler process (here) fulfils too.
* ``process`` -- :class:`ProcessHandle`, one life of the process and where its traces are (pid,
  cache-dump dir, metrics URL, endpoint request log, delivery log, its own log): the interface
  with the observation side; :class:`VolcanoSpec` and :func:`volcano_argv`, the command line the
  experiment gives vc-scheduler.
* ``supervisor`` -- :class:`ExternalScheduler`, one instance's supervisor (start, stop, restart
  after exit as a Deployment would, leadership from the Lease, lives), and
  :func:`create_external_actor`, its Ray actor.
* ``observe`` (the observation side) -- the digest from the cache dump, decisions from the
  endpoint's request log, /metrics: ``observe(handle, decisions_since) -> dict``.
"""
