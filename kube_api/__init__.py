"""A Kubernetes REST API front over the testbed's API server (``cluster_state``): kubectl, the
official Python client and client-go programs run against it. Redis Streams stay the only truth:
the front keeps no copy of objects; every request is a store operation.

The map:

* ``resources`` -- the registry of served resources (modelled kinds, and the always-empty
  collections a scheduler's informers list);
* ``status`` -- Kubernetes ``Status`` errors; ``codec`` -- stored shape <-> Kubernetes JSON;
* ``context`` -- ``RequestContext``, one parsed request (body: JSON or protobuf);
* ``endpoint`` -- one listener per scheduler instance (plus an observer): its store client, its
  chaos (watch hooks, API faults, partition proxy; a ChaosPort-compatible door) and its logs;
* ``server`` -- the aiohttp server: routing, discovery, health, start/stop, kubeconfig;
* ``discovery``, ``lists``, ``watches``, ``selectors`` -- the read path;
* ``writes``, ``patch`` -- the write path; ``tables`` -- server-side ``meta.k8s.io/v1`` Tables;
* ``protobuf`` -- Kubernetes protobuf request bodies -> JSON dicts.

docs/kube-api.md describes what is served and how it differs from a kube-apiserver.
"""
