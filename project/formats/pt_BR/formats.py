# The demo shows times to people in one format everywhere: Django's admin lists and fields, the app's
# pages (`|date:"DATETIME_FORMAT"`), the playground and the terminal (falai_django.playground.display.when)
# all read DATETIME_FORMAT; a project without format modules gets Django's localized one throughout.
DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
DATE_FORMAT = "Y-m-d"
