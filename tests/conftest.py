"""Shared pytest setup: every test gets a fresh temporary directory and real processes are
always reaped, even when a test fails."""
