"""Built-in domains, one folder each (data model, tools, environment, data)."""
