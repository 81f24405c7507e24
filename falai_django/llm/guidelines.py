"""The engine's built-in speak guidelines: the engine sends them, and a provider may recognise
them (the offline provider skips them, as they are written for a model)."""

from __future__ import annotations

DEFAULT_COLLECT = ("Collect what is still missing, naturally, one or two things per message, at the pace of the "
                   "conversation.")
DEFAULT_ANSWER = "Answer the customer's message, in the flow of the conversation."
