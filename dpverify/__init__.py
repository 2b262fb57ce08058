"""dpverify."""
