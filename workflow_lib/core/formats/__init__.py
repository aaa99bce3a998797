"""File formats read by more than one stage (foundation): capture's sources and the importers
parse them the same way, so the parser lives here, before both in the flow."""
