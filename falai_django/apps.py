from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class FalaiConfig(AppConfig):
    name = "falai_django"
    label = "falai_django"
    verbose_name = _("Conversations")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from falai_django import checks  # noqa: F401 - registers the FALAI system checks
        from falai_django.channels.whatsapp import checks as whatsapp_checks  # noqa: F401 - and FALAI["WHATSAPP"]'s
        from falai_django.conf import reload
        from falai_django.flows import saving
        from falai_django.observe import install as install_observers

        setting_changed.connect(reload, dispatch_uid="falai_django.conf.reload")
        saving.connect()  # every Flow save checks its spec and resets the running agent
        install_observers()  # log lines name their conversation; model calls are counted
