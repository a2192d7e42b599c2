"""acp_client: a typed asyncio client for the Agent Client Protocol that keeps sessions alive
through network drops and agent restarts."""
