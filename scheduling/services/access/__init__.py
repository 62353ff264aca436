"""Who may do what: roles and checks, API tokens, the audit log."""
