"""What more than one action shares (Volcano's ``pkg/scheduler/actions/utils``): the gang path
of preempt and reclaim that the gang-aware eviction design describes and the sticky-domain
retrofit of their legacy loops (``gang_path``)."""
