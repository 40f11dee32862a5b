"""Task templates of the ledger suite: one module per coarse task type, plus the shared machinery."""
