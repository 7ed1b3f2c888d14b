"""Test support: a scriptable origin, the real proxy as a subprocess, capture readers."""
