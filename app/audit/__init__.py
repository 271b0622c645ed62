"""The audit log: every write that is not an upload, with who, when, before and after."""
