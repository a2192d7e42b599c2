"""JSON-RPC over one transport: the connection (pending table, dispatch, timeouts), version negotiation, what one
connection bounds, the wire log and the observer hooks. Knows transports only through their seam. The modules
here are private; this package imports nothing itself."""
