"""The session table and the conversation: what the client remembers of each session, replay reconciliation, the
stored form of a transcript, one record kept coherent. Pure: no I/O. The modules here are private; this
package imports nothing itself."""
