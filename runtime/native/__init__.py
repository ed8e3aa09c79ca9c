"""The native sandbox worker: a C program (QuickJS-ng, vendored in quickjs/) that speaks the
Python worker's pipe protocol (INTERFACE.md); built at install time (build.py), started by the
host when present (launch.py, runtime/sandbox/worker_process.py)."""
