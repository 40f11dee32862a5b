"""Backend implementations, one file each."""
