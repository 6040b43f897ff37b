"""Tests of the walls: secrets per process, settings that reach their processes, ..."""
