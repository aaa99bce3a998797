"""Foundation: what every stage shares, and nothing that belongs to one stage.

Records and their schemas (records), the Parquet tables (tables, arrow), the content-addressed
store (cas), atomic writes (atomic), bounds on untrusted input (bounds, safe_io, safe_pickle,
patterns), errors, the results-tree layout (layout), the vocabulary of call names, the incident
format (incident, formats/), the environment fingerprint, rule logging (rulelog) and config
errors. Nothing here imports a stage (docs/import_graph.py checks it).
"""
