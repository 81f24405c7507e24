"""The README tour's handoff step with the demo agent: take over, Ana stays silent, a human's
reply re-arms the silence timer (Ana's outbound event), give back, and the triage carries on."""

from __future__ import annotations

import pytest

from falai_django import handoff, host
from falai_django.models import HistoryItem, Wake
from falai_django.providers.offline import MARK

from . import support

pytestmark = pytest.mark.django_db(transaction=True)
SID = "5511977776666"


def say(text: str, n: int) -> host.HostResult:
    result = host.handle(SID, {"message": text, "id": f"wamid.{n}"})
    assert result.status in ("done", "unchanged"), result.error
    return result


def test_take_over_reply_as_human_and_give_back(demo_settings):
    assert handoff.outbound_event() == "humano_respondeu"
    say("oi", 1)
    handoff.take_over(SID, "maria")
    silent = say("João", 2)
    assert silent.result.messages == [] and silent.result.llm_calls == 0
    first_nudge = set(Wake.objects.filter(conversation_id=SID, key__startswith="silence:")
                      .values_list("key", flat=True))

    support.clock().advance("5m")
    reply = handoff.reply_as_human(SID, "Oi João, aqui é a Maria!", author="maria")
    assert reply.event == "humano_respondeu" and reply.turn.status == "done"
    nudges = set(Wake.objects.filter(conversation_id=SID, key__startswith="silence:", state="pending")
                 .values_list("key", flat=True))
    assert nudges and not nudges & first_nudge  # the timer counts from the human's reply now
    assert HistoryItem.objects.filter(conversation_id=SID, kind="human").count() == 1

    handoff.give_back(SID)
    assert "nome" not in back_data()  # a plain take-over spends no understand call: nothing landed
    back = say("João", 3)
    assert [m.text for m in back.result.messages] == [
        f"{MARK} Descubra quem é e de onde fala. Pergunte de qual empresa a pessoa fala."]
    assert back_data() == {"nome": "João"}


def back_data() -> dict:
    from falai_django.models import Conversation

    return Conversation.objects.get(pk=SID).blob["data"]
