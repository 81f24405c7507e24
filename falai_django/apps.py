from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class FalaiConfig(AppConfig):
    name = "falai_django"
    label = "falai_django"
    verbose_name = _("Conversations")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:  # host: register the FALAI system checks
        from . import checks  # noqa: F401
