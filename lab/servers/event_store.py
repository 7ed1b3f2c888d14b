"""The lab's in-memory `EventStore` for the official SDK server (the wheel ships none).

One store serves every session of a server process: the SDK's `EventStore` interface carries no
session, so ids are unique process-wide. Ids are a counter ("1", "2", ...) or UUIDs (seeded, so a
scenario can name them in `expected.json`). Priming events (`message is None`) issue a cursor but
are skipped on replay, as the SDK expects. `max_events` bounds the store: the oldest events are
evicted first, and a cursor that was evicted (or never issued) replays nothing.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Literal

from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCMessage

IdFormat = Literal["counter", "uuid"]


@dataclass(frozen=True)
class StoredEvent:
    """One issued cursor: the stream it belongs to and its message (None for a priming event)."""

    event_id: EventId
    stream_id: StreamId
    message: JSONRPCMessage | None


@dataclass(frozen=True)
class Replay:
    """One `replay_events_after` call, kept for the scenario's notes."""

    cursor: EventId
    stream_id: StreamId | None
    replayed: tuple[EventId, ...]


class LabEventStore(EventStore):
    """In-memory, optionally bounded, event store with deterministic ids."""

    def __init__(
        self, *, ids: IdFormat = "counter", seed: int = 0, max_events: int | None = None
    ) -> None:
        if max_events is not None and max_events <= 0:
            raise ValueError("max_events must be positive or None")
        self._ids = ids
        self._counter = itertools.count(1)
        self._random = random.Random(seed)
        self._events: deque[StoredEvent] = deque()
        self._max_events = max_events
        self.evicted = 0
        self.replays: list[Replay] = []

    def _next_id(self) -> EventId:
        if self._ids == "counter":
            return str(next(self._counter))
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event = StoredEvent(self._next_id(), stream_id, message)
        self._events.append(event)
        if self._max_events is not None and len(self._events) > self._max_events:
            self._events.popleft()
            self.evicted += 1
        return event.event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the messages of the cursor's own stream stored after it; None if unknown."""
        position = next(
            (i for i, event in enumerate(self._events) if event.event_id == last_event_id), None
        )
        if position is None:
            self.replays.append(Replay(last_event_id, None, ()))
            return None
        stream_id = self._events[position].stream_id
        # Snapshot first: send_callback awaits, and new events may be stored meanwhile.
        later = [
            event
            for event in list(self._events)[position + 1 :]
            if event.stream_id == stream_id and event.message is not None
        ]
        replayed: list[EventId] = []
        for event in later:
            assert event.message is not None
            await send_callback(EventMessage(event.message, event.event_id))
            replayed.append(event.event_id)
        self.replays.append(Replay(last_event_id, stream_id, tuple(replayed)))
        return stream_id

    def snapshot(self) -> dict[str, object]:
        """What the store holds, as JSON, for `/lab/state`."""
        return {
            "ids": self._ids,
            "stored": [
                {
                    "event_id": event.event_id,
                    "stream_id": event.stream_id,
                    "priming": event.message is None,
                }
                for event in self._events
            ],
            "evicted": self.evicted,
            "replays": [
                {"cursor": r.cursor, "stream_id": r.stream_id, "replayed": list(r.replayed)}
                for r in self.replays
            ],
        }
