"""The workflows surface (compatible with the workflow seed): `/api/workflows` and the
principal's `/api/preferences`."""
