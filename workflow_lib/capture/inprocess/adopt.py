"""The one link from the recorder to an in-process capture session (inprocess/session.py):
`current` is this process's session, or None. The program's own `FlightRecorder(...)` asks it
for the run's recorder (one incident per run). A module of its own so that recorder.py never
imports the session, which builds recorders."""

from __future__ import annotations

current = None
