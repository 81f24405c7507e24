"""Media providers the WhatsApp media tests name in `FALAI["MEDIA"]["PROVIDER"]`: one that
records what it was given and answers from a script, one without `transcribe`, and factories."""

from __future__ import annotations

from typing import Any

from falai_django.engine.errors import ProviderError


class Recording:
    """Records each call's bytes and mime type; answers `answers[method]` (an exception is raised)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, str]] = []
        self.answers: dict[str, Any] = {"transcribe": "meu nome é Joana", "describe_image": "um tênis vermelho"}

    def transcribe(self, data: bytes, mime_type: str) -> str:
        return self._answer("transcribe", data, mime_type)

    def describe_image(self, data: bytes, mime_type: str) -> str:
        return self._answer("describe_image", data, mime_type)

    def _answer(self, method: str, data: bytes, mime_type: str) -> str:
        self.calls.append((method, data, mime_type))
        answer = self.answers[method]
        if isinstance(answer, BaseException):
            raise answer
        return answer


class ImagesOnly:
    """Like Anthropic's provider: describes images, cannot transcribe."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def describe_image(self, data: bytes, mime_type: str) -> str:
        self.calls.append(mime_type)
        return "a receipt"


RECORDING = Recording()
IMAGES_ONLY = ImagesOnly()
made: list[str] = []


def reset() -> None:
    RECORDING.calls.clear()
    RECORDING.answers.update(transcribe="meu nome é Joana", describe_image="um tênis vermelho")
    IMAGES_ONLY.calls.clear()
    made.clear()


def recording_factory() -> Recording:
    """A factory (the setting may name one): called once per process and settings change."""
    made.append("recording")
    return RECORDING


def overloaded() -> ProviderError:
    return ProviderError("fake", "overload", "fake overload: the model is busy")
