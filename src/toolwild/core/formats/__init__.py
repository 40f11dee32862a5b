"""toolwild subpackage."""
