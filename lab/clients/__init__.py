"""Scripted lab clients: official-SDK clients and raw httpx clients."""
