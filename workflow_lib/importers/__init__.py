"""Importers: traces users already have (Kineto, Nsight Systems SQLite exports, NCCL flight recorder) -> incident directories
with the same tables the recorder writes, and `not_observed` for what the format lacks."""
