"""The ``toolwild`` command: one module per verb (:mod:`.main` assembles them), each parsing its options, calling
a library job (:mod:`toolwild.jobs`) and printing. Internal: the public surface is the command itself."""
