"""The real Volcano scheduler (``vc-scheduler``), built unmodified from its Go module.

* ``build`` -- ``ha-testbed volcano build [VERSION | --source PATH]``: the pinned build modules
  in ``go/volcano/<version>/`` (or a go.mod generated for a local checkout) are built with
  ``CGO_ENABLED=0`` into the user cache, never into the repository.

docs/real-volcano-build.md lists which versions the Go module proxy lets us build, and why the
others cannot be.
"""
