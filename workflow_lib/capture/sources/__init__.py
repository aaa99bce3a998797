"""Recorder sources: each owns its rings and returns its tables and its manifest `sources` entry."""
