"""The desk's rows beside the session: handoff markers, notes and assignments (a leaf).

`silencing.silence` / `silencing.give_back` write a marker here for every take-over, silence and
give-back, whoever calls them (the admin, the desk, the API, `manage.py falai_chat`), so the
transcript shows them all. An owner given as a username is mapped to the Django user of that
name when one exists (the desk's owner is a user; the blob keeps the name it was given).

They sit in `host/` beside the handoff's write path, which needs them; the desk (`handoff.desk`)
writes its notes and assignments through them too.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from falai_django.models import Assignment, DeskEntry, History


def user_named(username: str | None) -> Any:
    """The active user with this username, or None."""
    if not username:
        return None
    model = get_user_model()
    return model._default_manager.filter(**{model.USERNAME_FIELD: username}, is_active=True).first()


def display_name(user: Any) -> str:
    return user.get_username() if user is not None else ""


def mark(session_id: str, kind: str, *, by: Any = None, text: str = "", author_name: str = "") -> DeskEntry:
    """One marker (or note) line in the conversation's transcript, after its newest item."""
    newest = History.objects.filter(conversation_id=session_id).order_by("-id").values_list("id", flat=True).first()
    return DeskEntry.objects.create(conversation_id=session_id, kind=kind, author=by, after_item=newest or 0,
                                    author_name=(author_name or display_name(by))[:255], text=text)


def assignee_of(session_id: str) -> Any:
    row = Assignment.objects.filter(conversation_id=session_id).select_related("assignee").first()
    return row.assignee if row is not None else None


def set_assignee(session_id: str, user: Any) -> None:
    """Assign the conversation to `user` (None: unassign)."""
    if user is None:
        Assignment.objects.filter(conversation_id=session_id).delete()
        return
    Assignment.objects.update_or_create(conversation_id=session_id, defaults={"assignee": user})
