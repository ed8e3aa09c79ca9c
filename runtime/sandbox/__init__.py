"""The sandbox: the worker process that runs scripts in QuickJS, its pipe protocol and the pool of workers."""
