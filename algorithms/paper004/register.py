"""Paper 004's claims register (filled below)."""

REGISTER: tuple = ()
