"""The docs and the code agree: every cited setting, flag and path, and the code's shape that the
docs draw."""
