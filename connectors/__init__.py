"""Source and vector-store connectors behind ragsync's protocols.

The engine finds these through entry points (``ragsync.sources``, ``ragsync.stores``); they
depend only on ``ragsync.protocols``, ``ragsync.models``, ``ragsync.errors`` and small helpers.
"""
