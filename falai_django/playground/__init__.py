"""The playground: a staff page to chat with the running agent and watch its state, and the
helpers `manage.py falai_chat` shares with it.

- `drive`    driving a conversation by hand: the side panel's snapshot, fast-forward, events
- `views`    the page and its JSON endpoints (`urls` routes them under `playground/`)
- `display`  how people see values: one time format, no `None`

It imports `host/` (the turn pipeline and the conversation read model), `handoff/` (a human's
reply labels) and `models/`; nothing below it imports the playground.
"""
