"""One link's life: opening it, supervising it through drops, its published state, the outage queue, the engine's
seam to its links, what each link may speak for, and the engine's events. The modules here are private; this
package imports nothing itself."""
