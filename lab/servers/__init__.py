"""Lab servers: the official-SDK server, its event store, and purpose-built servers."""
