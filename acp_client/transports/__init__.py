"""Transports: one seam (:mod:`acp_client.transports.base`), four implementations."""
