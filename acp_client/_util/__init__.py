"""Small pieces every layer uses: option checks, frozen-value slots, background tasks, the version, the loggers,
callback delivery, file-system guards. Pure or nearly so; imports nothing above the foundation (exceptions,
clock, types). The modules here are private; this package imports nothing itself."""
