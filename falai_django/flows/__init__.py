"""Flows stored as data (`Flow` rows, edited in the admin or through `PUT flows/<id>`) and what
is built from them.

- `running`  the running agent: the code agent plus the enabled stored flows, rebuilt when a
             flow's version changes (`conf.get_agent()` asks it)
- `files`    export and import of stored flows as JSON files (`manage.py falai_flows`)
- `saving`   what a `Flow` save runs: the spec check (the model's `checking_spec` signal) and the
             running agent's reset (`post_save`, `post_delete`); `apps.ready` connects it
- `chart`    a FlowSpec as an SVG picture, drawn on the server
- `funnel`   where customers drop out of a flow, from the run log
- `drafts`   a FlowSpec written by the agent's provider from a description, saved disabled

It imports `engine/`, `models/` and the settings; the admin, the API and the commands import it.
`host/` never does: it reaches the running agent through `conf.get_agent()`.
"""
