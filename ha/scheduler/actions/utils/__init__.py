"""What more than one action shares (Volcano's ``pkg/scheduler/actions/utils``): seed 001's gang
path of preempt and reclaim and the sticky-domain retrofit of their legacy loops (``gang_path``)."""
