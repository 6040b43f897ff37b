"""The web page at `/` (its files in `static/`) and the small API it reads."""
