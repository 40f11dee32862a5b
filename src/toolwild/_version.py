"""toolwild's version, in a module of its own: the package's ``__init__`` names every job, so a module below the jobs
(the report's footer, the MCP server's handshake) that asked ``toolwild`` for it would import in a circle."""

__version__ = "0.1.0"
