"""Helpers shared by the test tiers (importable as `helpers.*`: tests/conftest.py puts tests/ on the path)."""
